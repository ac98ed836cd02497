"""What the local stack's scenario reads from a controller pass's JSON log (`reconcile.log`, one
object a line): the actions it took, what it said of one pod's idleness, and why a pass that
exited non-zero failed, so the scenario's account says so instead of a bare exit status."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

ACTION_EVENTS = (
    "idle.warn",
    "idle.reclaim",
    "idle.clear",
    "preempt.evict",
    "preempt.preempt",
    "spend.publish",
)


@dataclass
class Decision:
    at: str
    event: str
    target: str
    reason: str


@dataclass
class ScenarioRun:
    """What the scenario saw: refusals by the gate, decisions by the controller, pod waits."""

    refused: list[tuple[str, str]] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    passes: list[int | None] = field(default_factory=list)
    failures: list[list[str]] = field(default_factory=list)
    """Each pass's errors (`pass_errors`), empty for a pass that exited 0."""
    notebook: list[list[str]] = field(default_factory=list)
    """What each pass logged of the idle notebook's judgements (`idle_events`)."""


def log_entries(log_text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of a controller pass's log, one a line; other lines are skipped."""
    for line in log_text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            yield entry


def controller_actions(log_text: str) -> list[Decision]:
    """The actions in a controller pass's JSON log (one object per line)."""
    out = []
    for entry in log_entries(log_text):
        event = str(entry.get("event", ""))
        if event in ACTION_EVENTS and "target" in entry:
            out.append(
                Decision(
                    at=str(entry.get("ts", "")),
                    event=event,
                    target=str(entry["target"]),
                    reason=str(entry.get("reason", "")),
                )
            )
    return out


def idle_events(log_text: str, pod_key: str) -> list[str]:
    """What a pass's JSON log says of one pod's idleness, beyond the actions: why it was kept
    (partial evidence, held with its workload, refused by the policy)."""
    out = []
    for entry in log_entries(log_text):
        event = str(entry.get("event", ""))
        if not event.startswith("idle.") or event in ACTION_EVENTS:
            continue
        if pod_key not in (
            str(entry.get("pod", "")),
            str(entry.get("target", "")).split("/", 1)[-1],
        ):
            continue
        reason = entry.get("reason") or "; ".join(map(str, entry.get("reasons") or [])) or "-"
        out.append(f"{event}: {reason}")
    return out


def pass_errors(log_text: str) -> list[str]:
    """What a pass logged at level error: its event, target and error, one line each."""
    out = []
    for entry in log_entries(log_text):
        if entry.get("level") != "error":
            continue
        where = entry.get("target") or entry.get("pod") or entry.get("concern") or ""
        what = entry.get("error") or entry.get("reason") or "-"
        out.append(f"{entry.get('event', '?')} {where}: {what}".replace("  ", " "))
    return out
