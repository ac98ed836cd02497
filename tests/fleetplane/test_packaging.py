"""Honest packaging: the wheel, installed into an empty virtual environment, gives a working
`fleetplane` outside the checkout. The controller installs without Pulumi, the cloud SDKs,
pydantic, numpy or matplotlib; the `replay` extra adds what `render`, `replay` and `policy diff`
need, and their data (policies, stacks, the trace, the corpus) comes with the package."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from localfleet.binaries import BIN_DIR
from tests.replay.test_cli import small_trace

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(out), str(ROOT)],
        check=True,
    )  # fmt: skip
    (built,) = out.glob("fleetplane-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """An empty virtual environment with the wheel and its base dependencies only."""
    env = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True).create(env)
    pip = [str(env / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, str(wheel)], check=True)
    yield env


def run(env: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    environment["FLEETPLANE_BIN_DIR"] = str(BIN_DIR)  # the pinned OPA, for replay and policy
    return subprocess.run(
        [str(env / "bin" / "fleetplane"), *argv],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_wheel_carries_the_package_data(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in (
        "fleet/policies/system/main.rego",
        "fleet/stacks/Pulumi.local.yaml",
        "replay/scenarios.yaml",
        "replay/policy/batch.rego",
        "replay/traces/alibaba-gpu-v2023/openb_pod_list_default.csv",
        "policyreview/corpus/config.json",
    ):
        assert expected in names, expected
    assert not any(name.startswith(("tools/", "tests/", "bench/")) for name in names)


def test_the_controller_installs_without_pulumi_numpy_or_plotting(
    installed: Path, tmp_path: Path
) -> None:
    python = str(installed / "bin" / "python")
    for absent in ("pulumi", "pydantic", "numpy", "matplotlib", "pulumi_aws"):
        found = subprocess.run([python, "-c", f"import {absent}"], capture_output=True)
        assert found.returncode != 0, f"{absent} is installed with the base dependencies"
    assert run(installed, "--help", cwd=tmp_path).returncode == 0
    for command in (["controller", "reconcile"], ["controller", "upgrade", "run"]):
        done = run(installed, *command, "--help", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    done = run(installed, "controller", "reconcile", "--config", "missing.json", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "missing.json" in done.stderr


def test_each_room_runs_outside_the_checkout(wheel: Path, installed: Path, tmp_path: Path) -> None:
    subprocess.run(
        [str(installed / "bin" / "python"), "-m", "pip", "install", "-q", f"{wheel}[replay]"],
        check=True,
    )
    work = tmp_path / "elsewhere"
    work.mkdir()
    rendered = run(installed, "render", "--stack", "local", cwd=work)
    assert rendered.returncode == 0, rendered.stderr
    assert '"teams"' in rendered.stdout

    trace = tmp_path / "trace"
    trace.mkdir()
    small_trace(trace)
    replayed = run(
        installed, "replay", "--trace-dir", str(trace), "--window", "all",
        "--scenario", "fixed", "--quiet", cwd=work,
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr
    assert "fixed" in replayed.stdout

    diffed = run(
        installed, "policy", "diff", "--base", "HEAD", "--repo", str(ROOT), "--trace", "none",
        cwd=work,
    )  # fmt: skip
    assert diffed.returncode == 0, diffed.stderr
    assert "policy diff" in diffed.stdout.lower()

    tested = run(installed, "policy", "test", "--help", cwd=work)
    assert tested.returncode == 0
    health = run(installed, "health", "check", "--help", cwd=work)
    assert health.returncode == 0
    local = run(installed, "up", "--help", cwd=work)
    assert local.returncode == 0
