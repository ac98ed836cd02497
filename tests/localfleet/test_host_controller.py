"""The main job's terminal is for a person: a controller pass's JSON lines go to its log file
and the actions file; the terminal gets one line saying how the pass went and where its log is."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from localfleet.hostcontroller import HostController
from localfleet.stacklayout import StackLayout

SUMMARY = {"event": "pass.summary", "concerns": {"idle": {"pods": ["x" * 40] * 60}}}
ACTION = {"event": "idle.warn", "target": "Pod/analytics/nb", "reason": "idle for 60s"}


def test_a_pass_prints_one_line_and_keeps_its_json_in_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    controller = HostController(StackLayout(state_dir=tmp_path, log=said.append))
    script = f"import json; print(json.dumps({ACTION!r})); print(json.dumps({SUMMARY!r}))"
    monkeypatch.setattr(controller, "command", lambda *_: [sys.executable, "-c", script])
    controller.work_dir.mkdir(parents=True)

    assert controller.controller_pass() == 0

    assert len(json.dumps(SUMMARY)) > 2000  # as long as a real pass summary
    assert all(len(line) < 300 and '"event"' not in line for line in said), said
    assert said[-1] == f"  controller pass ok: 1 decision(s) (log: {controller.reconcile_log})"
    assert json.loads(controller.reconcile_log.read_text().splitlines()[-1]) == SUMMARY
    (action,) = controller.actions_file.read_text().splitlines()
    assert json.loads(action)["event"] == "idle.warn"
