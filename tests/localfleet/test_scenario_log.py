"""The scenario reads each controller pass's JSON log: the actions, and why the idle notebook
was kept when a pass did not reclaim it (so a run that misses the reclaim says why)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from localfleet.scenario import NOTEBOOK_KEY, Scenario
from localfleet.scenario_log import controller_actions, idle_events, pass_errors


def _log(*entries: dict[str, object]) -> str:
    return "\n".join(["not json: a stray line", *(json.dumps(e) for e in entries)])


def test_the_actions_and_the_notebooks_judgements_are_read_apart() -> None:
    text = _log(
        {"event": "idle.warn", "target": f"Pod/{NOTEBOOK_KEY}", "reason": "idle for 60s"},
        {
            "event": "idle.no-evidence",
            "pod": NOTEBOOK_KEY,
            "reason": "partial metrics: 11 samples in the 60s window, 12 expected",
        },
        {"event": "idle.no-evidence", "pod": "analytics/other", "reason": "no DCGM series"},
        {"event": "idle.reclaim.denied", "target": f"Pod/{NOTEBOOK_KEY}", "reasons": ["exempt"]},
        {"event": "spend.publish", "reason": "no target: not an action on a workload"},
    )
    assert [(d.event, d.target) for d in controller_actions(text)] == [
        ("idle.warn", f"Pod/{NOTEBOOK_KEY}")
    ]
    assert idle_events(text, NOTEBOOK_KEY) == [
        "idle.no-evidence: partial metrics: 11 samples in the 60s window, 12 expected",
        "idle.reclaim.denied: exempt",
    ]
    assert idle_events(text, "analytics/missing") == []


class _Stack:
    """Passes that log what is scripted, one entry a pass, into the file the scenario reads."""

    def __init__(self, services_dir: Path, passes: list[dict[str, str]]) -> None:
        self.services_dir = services_dir
        self.passes = passes
        (services_dir / "controller").mkdir(parents=True)

    def controller_pass(self) -> int:
        entry = self.passes.pop(0)
        (self.services_dir / "controller" / "reconcile.log").write_text(json.dumps(entry))
        return 1 if entry.get("level") == "error" else 0


KEPT = {
    "event": "idle.no-evidence",
    "pod": NOTEBOOK_KEY,
    "reason": "partial metrics: 11 samples in the 60s window, 12 expected",
}
RECLAIMED = {"event": "idle.reclaim", "target": f"Pod/{NOTEBOOK_KEY}", "reason": "idle"}


def test_a_pass_that_keeps_the_notebook_is_followed_by_another(tmp_path: Path) -> None:
    stack = _Stack(tmp_path, [KEPT, RECLAIMED, KEPT])
    said: list[str] = []
    scenario = Scenario(stack=stack, log=said.append)
    scenario.controller_pass()
    scenario.pass_until("idle.reclaim", until=time.time() + 30, every=0.01)
    assert scenario.run_state.passes == [0, 0]  # stopped at the reclaim
    assert [d.event for d in scenario.run_state.decisions] == ["idle.reclaim"]
    assert "partial metrics: 11 samples" in said[0] and "another pass" in said[0]


def test_no_pass_once_the_warning_would_be_outside_the_window(tmp_path: Path) -> None:
    stack = _Stack(tmp_path, [KEPT, RECLAIMED])
    scenario = Scenario(stack=stack)
    scenario.controller_pass()
    scenario.pass_until("idle.reclaim", until=time.time() + 0.5, every=1.0)
    assert scenario.run_state.passes == [0]
    account = scenario.notebook_account()
    assert account[0] == f"  {NOTEBOOK_KEY} not reclaimed; its judgements:"
    assert "scenario pass 1: idle.no-evidence: partial metrics" in account[1]


CONFLICT = {
    "level": "error",
    "event": "burst.open.failed",
    "target": "research",
    "error": "PATCH /apis/scheduling.volcano.sh/v1beta1/queues/research: HTTP 409",
    "kind": "temporary",
}


def test_a_failed_pass_is_accounted_with_its_errors(tmp_path: Path) -> None:
    assert pass_errors(_log(CONFLICT, KEPT)) == [
        "burst.open.failed research: PATCH /apis/scheduling.volcano.sh/v1beta1/queues/research: "
        "HTTP 409"
    ]
    assert pass_errors(_log(KEPT)) == []
    stack = _Stack(tmp_path, [CONFLICT, RECLAIMED])
    scenario = Scenario(stack=stack)
    scenario.controller_pass()
    scenario.controller_pass()
    assert scenario.run_state.passes == [1, 0]
    assert scenario.run_state.failures == [pass_errors(json.dumps(CONFLICT)), []]


def test_a_first_pass_without_the_warning_is_followed_by_another_and_its_time_kept(
    tmp_path: Path,
) -> None:
    warned = {
        "ts": "2026-11-29T18:13:56.967+00:00",
        "event": "idle.warn",
        "target": NOTEBOOK_KEY,
        "reason": "idle",
    }
    stack = _Stack(tmp_path, [KEPT, warned, RECLAIMED])
    scenario = Scenario(stack=stack)
    scenario.controller_pass()
    at = scenario.pass_until("idle.warn", until=time.time() + 30, every=0.01)
    assert at == 1795976036.967  # the warning's own time: the grace and the window count from it
    assert scenario.run_state.passes == [0, 0] and len(stack.passes) == 1
