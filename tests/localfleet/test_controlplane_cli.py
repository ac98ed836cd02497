"""`fleetplane cluster up|status|down` as a user runs it: a detached cluster that
outlives the command, prints its inventory, and leaves no process or data behind on `down`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from localfleet.controlplane import ROOT, proc_stat

pytestmark = pytest.mark.integration


def cli(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetplane", "cluster", "--dir", str(state), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie left for the init process to reap is not running.
    try:
        return proc_stat(pid)[0] != "Z"
    except FileNotFoundError:
        return False


def test_up_status_down_leaves_nothing_behind(tmp_path: Path) -> None:
    state = tmp_path / "local"
    up = cli(state, "up")
    assert up.returncode == 0, up.stderr
    assert "total: 128 nvidia.com/gpu, 16 google.com/tpu" in up.stdout
    assert f"export KUBECONFIG={state / 'kubeconfig'}" in up.stdout
    pids = json.loads((state / "pids.json").read_text())["pids"]
    assert set(pids) == {
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kwok",
    }
    try:
        again = cli(state, "up")
        assert again.returncode == 0 and "already running" in again.stdout
        status = cli(state, "status")
        assert status.returncode == 0 and "kube-apiserver" in status.stdout
    finally:
        down = cli(state, "down")
    assert down.returncode == 0, down.stderr
    assert not any(alive(pid) for pid in pids.values())
    assert not state.exists()
    assert cli(state, "status").returncode == 2


def test_up_without_tools_names_the_missing_tool_and_the_fix(tmp_path: Path) -> None:
    from localfleet.controlplane import ClusterError, LocalCluster

    cluster = LocalCluster(data_dir=tmp_path / "c", bin_dir=tmp_path / "empty-bin")
    with pytest.raises(ClusterError, match=r"missing tool\(s\) etcd, kube-apiserver.*make tools"):
        cluster.start()
