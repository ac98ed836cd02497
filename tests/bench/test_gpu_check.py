"""`python -m bench.gpu_check`, the one command that checks the GPU path on a machine, run for
real on this GPU-less machine: it must say "no NVIDIA driver" in words and fail."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _nvml_library_loads() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_nvml_library_loads(), reason="libnvidia-ml is present: this is a GPU machine")
def test_without_a_driver_it_says_no_nvidia_driver_and_fails() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.gpu_check", "--xid-wait-seconds", "0"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert document["result"] == "no-driver"
    assert document["reason"].startswith("no NVIDIA driver on the node")
    assert "NVMLError_LibraryNotFound" in document["reason"]
    assert document["verdict"]["status"] == "unavailable"
    assert document["verdict"]["reason"] == "no-driver"
    assert "gpu check: no-driver: no NVIDIA driver" in done.stderr
