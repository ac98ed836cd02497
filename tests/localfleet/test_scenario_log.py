"""The scenario reads each controller pass's JSON log: the actions, and why the idle notebook
was kept when a pass did not reclaim it (so a run that misses the reclaim says why)."""

from __future__ import annotations

import json

from localfleet.scenario import NOTEBOOK_KEY, controller_actions, idle_events


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
