"""The validator pod and reading its verdict; the compact termination message it writes."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from controller.nodeflow.validator import (
    HEALTHY,
    MESSAGE_LIMIT,
    UNAVAILABLE,
    UNHEALTHY,
    read_verdict,
    termination_message,
    validator_pod,
)
from controller.upgrade.observe import Terminated
from tests.controller.health.fake_nvml import (
    NVML_ERROR_DRIVER_NOT_LOADED,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    FakeGpu,
    FakeNode,
    FakeNvml,
)
from tests.controller.health.test_check import main as health_main
from tests.controller.upgrade.builders import NEW, SETTINGS, node, settings, verdict


def test_validator_pod_is_pinned_tolerant_and_runs_the_health_check() -> None:
    view = node("p-0").cordoned().view()
    manifest = validator_pod(view, attempt=3, target=NEW, settings=settings(xid_wait_seconds=0.0))
    spec = manifest["spec"]
    container = spec["containers"][0]
    assert manifest["metadata"]["name"] == "fleetplane-validate-p-0-3"
    assert manifest["metadata"]["namespace"] == "fleetplane-system"
    assert spec["nodeName"] == "p-0"
    assert spec["restartPolicy"] == "Never"
    assert {
        "key": "nvidia.com/gpu",
        "operator": "Equal",
        "value": "present",
        "effect": "NoSchedule",
    } in spec["tolerations"]
    assert any(t["key"] == "node.kubernetes.io/unschedulable" for t in spec["tolerations"])
    assert container["command"] == ["fleetplane", "controller", "upgrade", "validate"]
    assert container["args"] == [
        "--expect-driver",
        NEW,
        "--expect-gpus",
        "8",
        "--xid-wait-seconds",
        "0",
    ]
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"} in container["env"]
    assert "nvidia.com/gpu" not in json.dumps(container["resources"])


def run_health(fake: FakeNode, args: list[str]) -> tuple[int, dict[str, object]]:
    """The real health check's command line against the fake NVML."""
    out = io.StringIO()
    with redirect_stdout(out):
        code = health_main(["check", *args, "--node", "p-0"], nvml=FakeNvml(fake))
    return code, json.loads(out.getvalue())


ARGS = ["--expect-driver", NEW, "--expect-gpus", "8", "--xid-wait-seconds", "0"]


@pytest.mark.parametrize(
    ("fake", "want", "reason_part"),
    [
        (FakeNode.hgx(8).with_driver(NEW), HEALTHY, "every health check passed"),
        (
            FakeNode.hgx(8).with_driver(NEW).gpu(3, lambda g: g.with_volatile_dbe(1)),
            UNHEALTHY,
            "ecc_dbe",
        ),
        (FakeNode.hgx(7).with_driver(NEW), UNHEALTHY, "device_count"),
        (FakeNode.hgx(8).with_driver("550.54.15"), UNHEALTHY, "driver_version"),
        (
            FakeNode.hgx(8, FakeGpu.a100)
            .with_driver(NEW)
            .gpu(0, lambda g: g.change(remapped_rows=[0, 1, 0, 1])),
            UNHEALTHY,
            "row_remap",
        ),
        (FakeNode.hgx(8).with_driver(NEW).gpu(4, lambda g: g.with_xids(79)), UNHEALTHY, "xid"),
        (
            FakeNode.hgx(8).with_driver(NEW).gpu(6, lambda g: g.change(temperature_c=91)),
            UNHEALTHY,
            "temperature",
        ),
        (
            FakeNode.hgx(8).without_nvml(NVML_ERROR_DRIVER_NOT_LOADED),
            UNAVAILABLE,
            "could not check",
        ),
        # No libnvidia-ml at all: no driver will appear by waiting, so the node fails at once.
        (
            FakeNode.hgx(8).without_nvml(NVML_ERROR_LIBRARY_NOT_FOUND),
            UNHEALTHY,
            "no NVIDIA driver on the node (no-driver): libnvidia-ml is not loadable",
        ),
    ],
)
def test_verdicts_of_the_real_health_check(fake: FakeNode, want: str, reason_part: str) -> None:
    code, document = run_health(fake, ARGS)
    message = termination_message(document)
    assert len(message.encode()) <= MESSAGE_LIMIT
    outcome = read_verdict(
        Terminated(exit_code=code, message=message, reason=""), target=NEW, gpus=8
    )
    assert outcome.kind == want
    assert reason_part in outcome.reason


def test_exit_zero_without_a_verdict_proves_nothing() -> None:
    outcome = read_verdict(
        Terminated(exit_code=0, message="", reason="Completed"), target=NEW, gpus=8
    )
    assert outcome.kind == UNAVAILABLE


def test_exit_zero_with_a_contradicting_verdict_fails() -> None:
    message = verdict(driver="550.54.15")
    outcome = read_verdict(Terminated(exit_code=0, message=message, reason=""), target=NEW, gpus=8)
    assert outcome.kind == UNHEALTHY
    assert "550.54.15 is loaded" in outcome.reason


def test_log_tail_of_a_crash_is_unavailable() -> None:
    outcome = read_verdict(
        Terminated(exit_code=137, message="Traceback ...\nKilled", reason="OOMKilled"),
        target=NEW,
        gpus=8,
    )
    assert outcome.kind == UNAVAILABLE
    assert "exit 137" in outcome.reason


def test_termination_message_fits_with_many_problems() -> None:
    fake = FakeNode.hgx(8).with_driver(NEW)
    for index in range(8):
        fake = fake.gpu(
            index,
            lambda g: g.with_volatile_dbe(1).with_xids(48, 79, 94, 95).change(temperature_c=99),
        )
    code, document = run_health(fake, ARGS)
    assert code == 1
    message = termination_message(document)
    assert len(message.encode()) <= MESSAGE_LIMIT
    compact = json.loads(message)
    assert compact["problems_omitted"] > 0
    assert compact["status"] == "unhealthy"
    assert (
        read_verdict(Terminated(exit_code=1, message=message, reason=""), target=NEW, gpus=8).kind
        == UNHEALTHY
    )


def test_settings_default_health_options_are_left_to_the_check() -> None:
    manifest = validator_pod(node("p-0").view(), attempt=1, target=NEW, settings=SETTINGS)
    assert manifest["spec"]["containers"][0]["args"] == [
        "--expect-driver",
        NEW,
        "--expect-gpus",
        "8",
    ]


def _nvml_library_loads() -> bool:
    import ctypes

    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_nvml_library_loads(), reason="libnvidia-ml is present: this is a GPU machine")
def test_validate_entry_point_writes_the_termination_message(tmp_path: Path) -> None:
    """What the validator container runs, in a real process on this GPU-less machine: the
    health check exits 2 (NVML library not found); the full verdict goes to stdout and the
    compact one to the termination-message file."""
    termination = tmp_path / "termination-log"
    result = subprocess.run(
        [sys.executable, "-m", "fleetplane", "controller", "upgrade", "validate", *ARGS],
        capture_output=True,
        text=True,
        env={**os.environ, "TERMINATION_MESSAGE_PATH": str(termination)},
        cwd=Path(__file__).resolve().parents[3],
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    full = json.loads(result.stdout)
    assert full["status"] == "unavailable"
    compact = json.loads(termination.read_text())
    assert compact["status"] == "unavailable"
    assert compact["problems"][0]["check"] == "nvml"
    assert full["reason"] == compact["reason"] == "no-driver"
    outcome = read_verdict(
        Terminated(exit_code=2, message=termination.read_text(), reason="Error"), target=NEW, gpus=8
    )
    # Issue 32: a node without an NVIDIA driver fails at once, in words, not at the timeout.
    assert outcome.kind == UNHEALTHY
    assert outcome.reason.startswith("no NVIDIA driver on the node (no-driver)")
    assert "NVMLError_LibraryNotFound" in outcome.reason
