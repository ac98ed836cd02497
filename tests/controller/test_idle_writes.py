"""The idle writes against a scripted API (answers no real cluster gives on demand: a conflict,
then a pod created again under the same name)."""

from __future__ import annotations

import copy
from typing import Any

from components import labels as keys
from controller.act.events import EventRecorder
from controller.act.idle import clear_warning, warn
from controller.act.runtime import Runtime
from controller.config import IdleRule, Settings
from controller.decide.idle import PodJudgement, Verdict
from controller.errors import ConflictError
from controller.summary import Summary
from tests.controller.builders import NOW, a_pod, fleet

RULE = IdleRule(util_threshold_percent=5.0, window_seconds=3600, grace_seconds=1800)


class ScriptedKube:
    """merge_patch answers 409 `conflicts` times, then echoes the patch; get returns `current`;
    every write is recorded."""

    def __init__(self, current: dict[str, Any], conflicts: int = 1) -> None:
        self.current = current
        self.conflicts = conflicts
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.events: list[dict[str, Any]] = []
        self.deletes: list[tuple[str, Any]] = []

    def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        if self.conflicts:
            self.conflicts -= 1
            raise ConflictError(f"PATCH {path}: HTTP 409: the object has been modified")
        self.patches.append((path, patch))
        return copy.deepcopy(self.current)

    def get(self, path: str) -> dict[str, Any]:
        return copy.deepcopy(self.current)

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.events.append(body)
        return body

    def delete(self, path: str, body: Any = None) -> Any:
        self.deletes.append((path, body))
        return {}


def runtime(kube: ScriptedKube) -> Runtime:
    return Runtime(
        kube=kube,  # type: ignore[arg-type]
        opa=None,  # type: ignore[arg-type]
        fleet=fleet(),
        settings=Settings(prometheus_url="http://unused", opa_url="http://unused"),
        now=NOW,
        summary=Summary(),
        events=EventRecorder(kube, dry_run=False),  # type: ignore[arg-type]
    )


def judged(builder: Any, verdict: Verdict = Verdict.WARN) -> PodJudgement:
    return PodJudgement(pod=builder.build(), verdict=verdict, reason="GPU idle for 1h", rule=RULE)


def test_a_warning_is_not_written_on_a_pod_created_again_under_the_same_name() -> None:
    judged_pod = a_pod("nb").uid("old-uid").gpus(1).on("h100-0")
    replacement = a_pod("nb").uid("new-uid").gpus(1).on("h100-0").raw()
    replacement["metadata"]["resourceVersion"] = "7"
    kube = ScriptedKube(replacement)
    assert warn(runtime(kube), judged(judged_pod)) is False
    assert kube.patches == []
    assert kube.events == []


def test_a_warning_is_written_after_a_conflict_on_the_same_pod() -> None:
    judged_pod = a_pod("nb").uid("same-uid").gpus(1).on("h100-0")
    current = a_pod("nb").uid("same-uid").gpus(1).on("h100-0").raw()
    current["metadata"]["resourceVersion"] = "7"
    kube = ScriptedKube(current)
    assert warn(runtime(kube), judged(judged_pod)) is True
    [(_, patch)] = kube.patches
    assert patch["metadata"]["resourceVersion"] == "7"
    assert patch["metadata"]["annotations"][keys.IDLE_WARNED_AT] == str(int(NOW))
    [event] = kube.events
    assert event["involvedObject"]["uid"] == "same-uid"
    assert event["reason"] == "IdleWarning"


def test_a_warning_is_not_cleared_on_a_pod_created_again_under_the_same_name() -> None:
    judged_pod = a_pod("nb").uid("old-uid").gpus(1).on("h100-0").warned(NOW - 60, NOW + 1740)
    replacement = a_pod("nb").uid("new-uid").gpus(1).on("h100-0").warned(NOW - 5, NOW + 1795)
    kube = ScriptedKube(replacement.raw())
    assert clear_warning(runtime(kube), judged(judged_pod, Verdict.BUSY)) is False
    assert kube.patches == []
    assert kube.events == []
