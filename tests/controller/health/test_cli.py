"""`fleetplane health` as the validator pod runs it: a real process, JSON on stdout,
the exit status. The fake NVML is put in place by tests/health/fake_nvml_shim.py; one test runs
the real pynvml on this GPU-less machine."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.controller.health.fake_nvml import NVML_ERROR_LIBRARY_NOT_FOUND, FakeNode
from tests.controller.health.fake_nvml_shim import SCENARIO_ENV

ROOT = Path(__file__).resolve().parents[3]
CHECK = [
    "health",
    "check",
    "--expect-driver",
    "570.124.06",
    "--expect-gpus",
    "8",
    "--xid-wait-seconds",
    "1",
]


def run_cli(
    module: str, args: list[str], scenario: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != SCENARIO_ENV}
    env["NODE_NAME"] = "gpu-node-0"
    if scenario is not None:
        env[SCENARIO_ENV] = str(scenario)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def run_with_fake(tmp_path: Path, node: FakeNode, args: list[str] = CHECK) -> tuple[int, Any]:
    scenario = tmp_path / "scenario.json"
    scenario.write_text(node.to_json())
    done = run_cli("tests.controller.health.fake_nvml_shim", args, scenario)
    return done.returncode, json.loads(done.stdout)


def test_healthy_node_exits_0(tmp_path: Path) -> None:
    code, verdict = run_with_fake(tmp_path, FakeNode.hgx(8))
    assert (code, verdict["healthy"], verdict["status"]) == (0, True, "healthy")
    assert verdict["node"] == "gpu-node-0"
    assert verdict["driver_version"] == "570.124.06"
    assert len(verdict["devices"]) == 8
    assert verdict["problems"] == []


def test_unhealthy_node_exits_1(tmp_path: Path) -> None:
    node = FakeNode.hgx(8).gpu(5, lambda g: g.with_volatile_dbe(1))
    code, verdict = run_with_fake(tmp_path, node, [*CHECK, "--max-temperature-c", "80"])
    assert (code, verdict["healthy"], verdict["status"]) == (1, False, "unhealthy")
    assert verdict["expected"]["max_temperature_c"] == 80
    assert verdict["problems"] == [
        {
            "device": 5,
            "check": "ecc_dbe",
            "detail": "1 volatile double-bit ECC error(s) since the driver loaded",
        }
    ]


def test_nvml_unavailable_exits_2(tmp_path: Path) -> None:
    code, verdict = run_with_fake(tmp_path, FakeNode().without_nvml(NVML_ERROR_LIBRARY_NOT_FOUND))
    assert (code, verdict["status"]) == (2, "unavailable")
    assert verdict["problems"][0]["detail"].startswith("NVML unavailable")


def _nvml_library_loads() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_nvml_library_loads(), reason="libnvidia-ml is present: this is a GPU machine")
def test_real_pynvml_without_a_gpu_reports_nvml_unavailable() -> None:
    done = run_cli("fleetplane", CHECK)
    verdict = json.loads(done.stdout)
    assert done.returncode == 2, done.stderr
    assert verdict["status"] == "unavailable"
    assert verdict["problems"] == [
        {
            "device": None,
            "check": "nvml",
            "detail": "NVML unavailable: NVML Shared Library Not Found (NVMLError_LibraryNotFound)",
        }
    ]


def test_help() -> None:
    done = run_cli("fleetplane", ["health", "check", "--help"])
    assert done.returncode == 0
    for text in ("--expect-driver", "--expect-gpus", "--max-temperature-c", "--xid-wait-seconds"):
        assert text in done.stdout
    assert "0 healthy, 1 unhealthy, 2 NVML unavailable" in done.stdout
    top = run_cli("fleetplane", ["health", "--help"])
    assert top.returncode == 0 and "check" in top.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["health", "check", "--expect-gpus", "8"],
        ["health", "check", "--expect-driver", "570.124.06", "--expect-gpus", "0"],
        [
            "health",
            "check",
            "--expect-driver",
            "570.124.06",
            "--expect-gpus",
            "8",
            "--xid-wait-seconds",
            "-1",
        ],
    ],
    ids=["driver missing", "zero GPUs", "negative wait"],
)
def test_usage_errors_exit_2_without_a_verdict(args: list[str]) -> None:
    done = run_cli("fleetplane", args)
    assert (done.returncode, done.stdout) == (2, "")
    assert "usage:" in done.stderr


def test_importing_the_package_does_not_load_pynvml() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import sys, controller.health; print('pynvml' in sys.modules)"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr


def test_production_code_knows_nothing_of_the_fake() -> None:
    for path in (ROOT / "controller" / "health").rglob("*.py"):
        text = path.read_text()
        assert SCENARIO_ENV not in text and "tests." not in text, path
