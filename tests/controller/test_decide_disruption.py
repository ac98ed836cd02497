"""The disruption concern's decide step, pure: the facts each pod is judged on, and the marks
an answer calls for (only the controller's own marks are ever cleared; no answer changes
nothing)."""

from __future__ import annotations

from dataclasses import replace

from controller.act.opa import Decision
from controller.decide.disruption import (
    DO_NOT_DISRUPT,
    OWNER,
    PROTECTED_BY,
    PROTECTED_REASON,
    Change,
    facts,
    plan_marks,
)
from tests.controller.builders import NOW, a_pod

GANG = "scheduling.k8s.io/group-name"


def test_facts_of_a_running_pod() -> None:
    pod = (
        a_pod("train").type("training").gpus(2).on("gpu-1", started=NOW - 100).checkpoint(NOW - 50)
    )
    [(judged, given)] = facts([pod.build()], NOW)
    assert judged.name == "train"
    assert given["workload_type"] == "training"
    assert given["running_seconds"] == 100
    assert given["checkpoints"] is True
    assert given["last_checkpoint"] == int(NOW - 50)
    assert given["gang"] is None
    assert given["now"] == int(NOW)


def test_the_start_named_by_now_less_running_seconds_is_the_same_every_pass() -> None:
    # a start known to a fraction of a second (the API server's startTime is whole seconds; a
    # start taken from elsewhere need not be): int(now - started) gave 100 at NOW and 101 at
    # NOW + 0.6, so the start the policy works out (now - running_seconds) moved by a second
    started = NOW - 100.7
    pod = replace(a_pod("train").type("training").gpus(1).on("gpu-1").build(), started=started)
    starts = set()
    for now in (NOW, NOW + 0.6, NOW + 1.2, NOW + 3600.9):
        [(_, given)] = facts([pod], now)
        starts.add(given["now"] - given["running_seconds"])
    assert starts == {int(started)}
    # a start after `now` (clock skew) is no negative run time
    early = a_pod("early").type("training").gpus(1).on("gpu-1", started=NOW + 30).build()
    [(_, given)] = facts([early], NOW)
    assert given["running_seconds"] == 0


def test_the_input_carries_the_pods_metadata_only_not_copied() -> None:
    pod = (
        a_pod("train")
        .type("training")
        .gpus(2)
        .on("gpu-1")
        .of_deployment("serve")
        .checkpoint(NOW - 50)
        .build()
    )
    [(_, given)] = facts([pod], NOW)
    assert given["pod"] == {"metadata": pod.metadata()}
    assert given["pod"]["metadata"] == pod.manifest()["metadata"]
    assert "spec" not in given["pod"] and "status" not in given["pod"]
    # the pod's own dicts, serialized as they are: no copy per pod per pass
    assert given["pod"]["metadata"]["labels"] is pod.labels
    assert given["pod"]["metadata"]["annotations"] is pod.annotations
    # the manifest stays a copy: callers that change it change no pod
    assert pod.manifest()["metadata"]["labels"] is not pod.labels


def test_a_gangs_checkpoint_is_its_oldest_members_and_none_when_one_has_none() -> None:
    def member(name: str, at: float | None):
        pod = a_pod(name).type("training").gpus(1).on("gpu-1").annotate(GANG, "pg")
        return (pod.checkpoint(at) if at is not None else pod).build()

    judged = facts([member("a", NOW - 10), member("b", NOW - 500)], NOW)
    assert [g["gang"] for _, g in judged] == [
        {"name": "ml-research/pg", "members": 2, "last_checkpoint": int(NOW - 500)}
    ] * 2
    judged = facts([member("a", NOW - 10), member("b", None)], NOW)
    assert judged[0][1]["gang"]["last_checkpoint"] is None


def test_a_future_or_malformed_checkpoint_counts_as_none() -> None:
    future = a_pod("f").type("training").gpus(1).on("gpu-1").checkpoint(NOW + 60).build()
    text = (
        a_pod("t")
        .type("training")
        .gpus(1)
        .on("gpu-1")
        .annotate("fleetplane.dev/last-checkpoint", "soon")
        .build()
    )
    assert [g["last_checkpoint"] for _, g in facts([future, text], NOW)] == [None, None]


def test_only_running_unexempt_accelerator_pods_not_freed_are_judged() -> None:
    pods = [
        a_pod("run").type("training").gpus(1).on("gpu-1").build(),
        a_pod("wait").type("training").gpus(1).pending(NOW - 10).build(),
        a_pod("exempt").type("training").gpus(1).on("gpu-1").exempt().build(),
        a_pod("going").type("training").gpus(1).on("gpu-1").deleting().build(),
        a_pod("freed").type("training").gpus(1).on("gpu-1").build(),
    ]
    freed = frozenset({pods[4].uid})
    assert [pod.name for pod, _ in facts(pods, NOW, freed)] == ["run"]


def test_marks_protect_unprotect_and_leave_others_alone() -> None:
    base = a_pod("x").type("training").gpus(1).on("gpu-1")
    bare = base.build()
    mine = (
        a_pod("mine")
        .type("training")
        .gpus(1)
        .on("gpu-1")
        .annotate(DO_NOT_DISRUPT, "true")
        .annotate(PROTECTED_BY, OWNER)
        .annotate(PROTECTED_REASON, "old reason")
        .build()
    )
    theirs = (
        a_pod("theirs")
        .type("training")
        .gpus(1)
        .on("gpu-1")
        .annotate(DO_NOT_DISRUPT, "true")
        .build()
    )
    protect = Decision(allow=False, reasons=("stale checkpoint",))
    allow = Decision(allow=True, reasons=("nothing protected",))
    marks = plan_marks(
        [
            (bare, protect),
            (mine, allow),
            (theirs, allow),
            (theirs, protect),
            (mine, None),
            (bare, None),
        ]
    )
    assert [(m.pod.name, m.change, m.reason) for m in marks] == [
        ("x", Change.PROTECT, "stale checkpoint"),
        ("mine", Change.UNPROTECT, "nothing protected"),
    ]
    # Our own protection with a changed reason is refreshed; with the same reason it is kept.
    assert [m.change for m in plan_marks([(mine, protect)])] == [Change.PROTECT]
    same = Decision(allow=False, reasons=("old reason",))
    assert plan_marks([(mine, same)]) == []
