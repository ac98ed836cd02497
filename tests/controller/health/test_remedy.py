"""`fleetplane health reset` and `health reboot`, what the remedy pods run: the reset through a
stand-in nvidia-smi on PATH (the command runs as the pod runs it, a child process), the reboot
with a fake /proc and kill."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from controller.health.remedy import REBOOT_SIGNAL, run_reboot
from tests.controller.health.fake_nvidia_smi import calls, install, state_of


def reset(
    tmp_path: Path, state: dict[str, object], *gpus: str
) -> tuple[int, dict[str, object], list[list[str]], dict[str, str]]:
    log = tmp_path / "calls.jsonl"
    env = {**os.environ, **install(tmp_path / "bin", state, log)}
    message = tmp_path / "termination-log"
    env["TERMINATION_MESSAGE_PATH"] = str(message)
    args = [arg for gpu in gpus for arg in ("--gpu", gpu)]
    done = subprocess.run(
        [sys.executable, "-m", "fleetplane", "health", "reset", *args, "--node", "gpu-1"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    document = json.loads(message.read_text())
    assert json.loads(done.stdout) == document
    return done.returncode, document, calls(log), env


def test_reset_turns_persistence_off_resets_and_turns_it_back_on(tmp_path: Path) -> None:
    code, document, made, env = reset(tmp_path, {"gpus": 8, "persistence": {"3": True}}, "3")
    assert code == 0 and document["ok"] is True
    assert made == [
        ["-i", "3", "--query-gpu=persistence_mode", "--format=csv,noheader"],
        ["-i", "3", "-pm", "0"],
        ["--gpu-reset", "-i", "3"],
        ["-i", "3", "-pm", "1"],
    ]
    assert state_of(env)["resets"] == [3]
    assert state_of(env)["persistence"] == {"3": True}
    gpu = document["gpus"]["3"]  # type: ignore[index]
    assert gpu["persistence_mode"] == "enabled" and gpu["persistence_mode_restored"] is True


def test_reset_without_persistence_mode_only_resets(tmp_path: Path) -> None:
    code, _, made, env = reset(tmp_path, {"gpus": 8}, "1", "2")
    assert code == 0
    assert [c for c in made if "--gpu-reset" in c] == [
        ["--gpu-reset", "-i", "1"],
        ["--gpu-reset", "-i", "2"],
    ]
    assert not [c for c in made if "-pm" in c]
    assert state_of(env)["resets"] == [1, 2]


def test_a_gpu_in_use_fails_the_reset(tmp_path: Path) -> None:
    code, document, _, env = reset(tmp_path, {"gpus": 8, "in_use": [0]}, "0", "1")
    assert code == 1 and document["ok"] is False
    assert "other error" in document["gpus"]["0"]["reset"]  # type: ignore[index]
    assert "in use by another process" in document["gpus"]["0"]["reset"]  # type: ignore[index]
    assert "1" not in document["gpus"]  # type: ignore[operator]
    assert "resets" not in state_of(env)


def test_an_unknown_gpu_is_not_found(tmp_path: Path) -> None:
    code, document, _, _ = reset(tmp_path, {"gpus": 2}, "5")
    assert code == 1
    assert "GPU not found" in document["gpus"]["5"]["error"]  # type: ignore[index]


def test_no_nvidia_smi_could_not_run(tmp_path: Path) -> None:
    message = tmp_path / "termination-log"
    env = {**os.environ, "PATH": str(tmp_path), "TERMINATION_MESSAGE_PATH": str(message)}
    done = subprocess.run(
        [sys.executable, "-m", "fleetplane", "health", "reset", "--gpu", "0"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "nvidia-smi is not in the container" in json.loads(message.read_text())["error"]


def test_reset_refuses_a_gpu_that_is_not_an_index(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fleetplane", "health", "reset", "--gpu", "all"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "not a GPU index" in done.stderr


def test_reboot_signals_systemd_and_refuses_another_init(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    (proc / "1").mkdir(parents=True)
    sent: list[tuple[int, int]] = []
    message = tmp_path / "termination-log"

    (proc / "1" / "comm").write_text("tini\n")
    assert (
        run_reboot(
            node="n", proc=proc, kill=lambda p, s: sent.append((p, s)), termination_log=message
        )
        == 2
    )
    assert sent == [] and "not systemd" in json.loads(message.read_text())["error"]

    (proc / "1" / "comm").write_text("systemd\n")
    assert (
        run_reboot(
            node="n", proc=proc, kill=lambda p, s: sent.append((p, s)), termination_log=message
        )
        == 0
    )
    assert sent == [(1, int(REBOOT_SIGNAL))] and int(REBOOT_SIGNAL) == 39
    assert json.loads(message.read_text())["ok"] is True
