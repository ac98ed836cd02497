"""The command line: help on every subcommand, a dry-run pass against the real parts with JSON
logs on stderr, the summary on stdout and the metrics textfile."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.controller.conftest import Harness, closed_url

ROOT = Path(__file__).resolve().parents[2]


def controller(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetplane", "controller", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("command", ["reconcile", "idle", "spend", "admission", "preempt"])
def test_every_subcommand_has_help(command: str) -> None:
    result = controller(command, "--help")
    assert result.returncode == 0
    for option in (
        "--config",
        "--kubeconfig",
        "--opa-url",
        "--prometheus-url",
        "--dry-run",
        "--metrics-file",
        "--pushgateway",
    ):
        assert option in result.stdout


def test_missing_config_is_a_usage_error() -> None:
    result = controller("reconcile")
    assert result.returncode == 2
    assert "--config" in result.stderr


def test_invalid_config_lists_every_problem(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "teams": {"x": {"monthly_budget_usd": "lots"}},
                "models": {},
                "workload_types": {"t": {"idle": {"window_seconds": -1}}},
            }
        )
    )
    result = controller("reconcile", "--config", str(config))
    assert result.returncode == 2
    for path in ("teams.x.monthly_budget_usd", "workload_types.t.idle", "namespaces", "budget"):
        assert path in result.stderr


@pytest.mark.integration
@pytest.mark.parametrize("content", [None, "", "one two"])
def test_an_unusable_opa_token_file_is_a_usage_error(tmp_path: Path, content: str | None) -> None:
    """OPA refuses the controller without its bearer token: the pass does not start, and says
    which file is wrong (the kube credentials are not even looked at)."""
    from fleet.config import load_stack_config
    from fleet.project import stack_file
    from fleet.render import render_opa_data

    config = tmp_path / "config.json"
    config.write_text(json.dumps(render_opa_data(load_stack_config(stack_file("local")))))
    token = tmp_path / "opa-token"
    if content is not None:
        token.write_text(content)
    result = controller(
        "reconcile", "--config", str(config), "--opa-token-file", str(token), "--dry-run"
    )
    assert result.returncode == 2
    assert f"OPA token file {token}: " in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.integration
def test_a_dry_run_pass_from_the_command_line(harness: Harness, tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(harness.document))
    metrics = tmp_path / "metrics" / "controller.prom"
    result = controller(
        "reconcile",
        "--config",
        str(config),
        "--kubeconfig",
        str(harness.kube.kubeconfig),
        "--opa-url",
        harness.opa.url,
        "--prometheus-url",
        closed_url(),
        "--lease-namespace",
        harness.namespace,
        "--dry-run",
        "--metrics-file",
        str(metrics),
    )
    # Prometheus is unreachable: the pass reports it (exit 1) and acts on nothing.
    assert result.returncode == 1, result.stderr
    logs = [json.loads(line) for line in result.stderr.splitlines()]
    assert {"ts", "level", "event"} <= set(logs[0])
    events = {line["event"] for line in logs}
    assert {"pass.start", "observe.snapshot", "idle.metrics-unavailable", "pass.summary"} <= events
    summary = next(line for line in result.stdout.splitlines() if line.startswith("SUMMARY "))
    assert json.loads(summary.removeprefix("SUMMARY "))["dry_run"] == 1
    text = metrics.read_text()
    assert "# TYPE fleetplane_controller_last_pass_success gauge" in text
    assert "fleetplane_controller_last_pass_success 0" in text
    assert 'fleetplane_controller_errors_total{concern="idle",kind="temporary"} 1' in text
    assert 'fleetplane_controller_passes_total{outcome="failed"} 1' in text


@pytest.mark.integration
def test_the_admission_keeper_runs_until_sigterm(harness: Harness, tmp_path: Path) -> None:
    """`admission --watch --dry-run`: a pass at once, another when a pod is created (which it
    would reserve), and exit 0 on SIGTERM."""
    import queue
    import signal
    import threading
    import time

    from controller.observe.kube import object_path
    from tests.policies.builders import training

    config = tmp_path / "config.json"
    config.write_text(json.dumps(harness.document))
    command = ["admission", "--watch", "--watch-interval", "0.2", "--config", str(config)]
    command += ["--kubeconfig", str(harness.kube.kubeconfig), "--opa-url", harness.opa.url]
    command += ["--lease-namespace", harness.namespace, "--dry-run"]
    keeper = subprocess.Popen(
        [sys.executable, "-m", "fleetplane", "controller", *command],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    printed: queue.Queue[str] = queue.Queue()
    assert keeper.stdout is not None
    threading.Thread(
        target=lambda: [printed.put(line) for line in keeper.stdout], daemon=True
    ).start()  # type: ignore[union-attr]

    def wait_for(text: str) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if text in printed.get(timeout=1):
                    return
            except queue.Empty:
                assert keeper.poll() is None, "the keeper exited"
        raise AssertionError(f"the keeper never printed {text!r}")

    try:
        wait_for("would publish data.fleetplane.reservations: nothing reserved")
        pod = training().in_namespace(harness.namespace).in_queue("research").object()
        pod["metadata"]["name"] = "kept"
        pod["spec"].pop("priorityClassName", None)
        harness.client.create(object_path("v1", "pods", harness.namespace, None), pod)
        wait_for("would publish data.fleetplane.reservations: research $")
    finally:
        keeper.send_signal(signal.SIGTERM)
        _, stderr = keeper.communicate(timeout=30)
    assert keeper.returncode == 0, stderr
    events = [json.loads(line) for line in stderr.splitlines()]
    wakes = [e for e in events if e["event"] == "keeper.wake"]
    assert f"pod added {harness.namespace}/kept" in [e["reason"] for e in wakes], wakes
    stop = next(e for e in events if e["event"] == "keeper.stop")
    assert stop["passes"] >= 2
