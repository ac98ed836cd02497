"""act.preempt on a pending gang's plan: every victim across the gang's nodes is put to the
policy before any is evicted, a refused victim sends the gang back to the planner, and a gang
that cannot have room for all its pods evicts nobody and says why (log, Event, summary). OPA
and the API server are scripted stand-ins: what is asked and written is what is checked."""

from __future__ import annotations

import io
from typing import Any

from controller.act.events import EventRecorder
from controller.act.opa import Decision
from controller.act.preempt import act_on_preemption
from controller.act.runtime import Runtime
from controller.config import Settings
from controller.decide.preempt import PreemptPlan, plan_preemption
from controller.observe.model import Node, Pod
from controller.summary import Summary
from tests.controller.builders import GPU_TOLERATIONS, NOW, a_node, a_pod, fleet

GANG = "scheduling.k8s.io/group-name"


class ScriptedOpa:
    """Allows every victim except those named in `refuse`; keeps (preemptor, victim) asked."""

    def __init__(self, refuse: set[str] | None = None) -> None:
        self.refuse = refuse or set()
        self.asked: list[tuple[str, str]] = []

    def decide(self, name: str, input: dict[str, Any]) -> Decision:
        assert name == "preempt"
        victim = input["victim"]["pod"]["metadata"]["name"]
        self.asked.append((input["preemptor"]["pod"]["metadata"]["name"], victim))
        if victim in self.refuse:
            return Decision(allow=False, reasons=(f"{victim} refused by the test",))
        return Decision(allow=True, reasons=("allowed",))


class RecordingKube:
    """Annotations, evictions and Events written, in order."""

    def __init__(self) -> None:
        self.evicted: list[str] = []
        self.events: list[dict[str, Any]] = []
        self.patched: list[str] = []

    def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patched.append(path.rsplit("/", 1)[-1])
        return patch

    def get(self, path: str) -> dict[str, Any]:
        return {"metadata": {"resourceVersion": "1", "annotations": {}}}

    def evict(self, namespace: str, name: str, *, uid: str, grace_seconds: int | None) -> None:
        self.evicted.append(name)

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.events.append(body)
        return body


def victim(name: str, node: str, started: float = NOW - 7200) -> Any:
    return (
        a_pod(name)
        .type("batch")
        .gpus(8)
        .priority(100)
        .on(node, started=started)
        .tolerate(GPU_TOLERATIONS)
    )


def gang_pod(name: str) -> Any:
    return (
        a_pod(name)
        .type("training")
        .gpus(8)
        .priority(5000)
        .pending(NOW - 1200)
        .tolerate(GPU_TOLERATIONS)
        .annotate(GANG, "pg-big")
    )


def planned(builders: list[Any], nodes: list[Node]) -> tuple[PreemptPlan, list[Pod]]:
    pods = [b.build() for b in builders]
    plan = plan_preemption(
        pods,
        {n.name: n for n in nodes},
        [],
        fleet(),
        lambda p: p.priority,
        NOW,
        pending_seconds=600,
        min_members={("ml-research", "pg-big"): 2},
    )
    return plan, pods


def runtime(opa: ScriptedOpa, kube: RecordingKube, *, dry_run: bool) -> Runtime:
    settings = Settings(prometheus_url="http://unused", opa_url="http://unused", dry_run=dry_run)
    return Runtime(
        kube=kube,  # type: ignore[arg-type]
        opa=opa,  # type: ignore[arg-type]
        fleet=fleet(),
        settings=settings,
        now=NOW,
        summary=Summary(dry_run=dry_run),
        events=EventRecorder(kube, dry_run=dry_run),  # type: ignore[arg-type]
        out=io.StringIO(),
    )


NODES = [a_node(n).gpus(8).build() for n in ("n1", "n2", "n3")]
"""Three full nodes (each test fills the ones it uses: an empty node would give room free)."""


def test_every_victim_of_the_gang_is_judged_before_any_is_evicted() -> None:
    plan, pods = planned(
        [victim("v1", "n1"), victim("v2", "n2"), gang_pod("g-0"), gang_pod("g-1")], NODES[:2]
    )
    opa, kube = ScriptedOpa(), RecordingKube()
    rt = runtime(opa, kube, dry_run=False)
    act_on_preemption(rt, plan, pods)
    assert opa.asked == [("g-0", "v1"), ("g-1", "v2")]
    assert kube.evicted == ["v1", "v2"]
    reasons = [(e["involvedObject"]["name"], e["reason"]) for e in kube.events]
    assert ("v1", "Preempted") in reasons and ("v2", "Preempted") in reasons
    assert ("g-0", "PreemptedForThis") in reasons and ("g-1", "PreemptedForThis") in reasons
    assert rt.summary.get("preemptors", state="planned") == 1


def test_under_dry_run_the_whole_gang_plan_is_printed_and_nothing_is_written() -> None:
    plan, pods = planned(
        [victim("v1", "n1"), victim("v2", "n2"), gang_pod("g-0"), gang_pod("g-1")], NODES[:2]
    )
    opa, kube = ScriptedOpa(), RecordingKube()
    rt = runtime(opa, kube, dry_run=True)
    act_on_preemption(rt, plan, pods)
    out = rt.out.getvalue()  # type: ignore[attr-defined]
    assert out.count("would evict ml-research/v") == 2
    assert "gang ml-research/pg-big" in out
    assert kube.evicted == [] and kube.events == [] and kube.patched == []


def test_a_refused_victim_sends_the_gang_back_to_the_planner() -> None:
    plan, pods = planned(
        [
            victim("v1", "n1"),
            victim("v2", "n2"),
            victim("v3", "n3", started=NOW - 9000),
            gang_pod("g-0"),
            gang_pod("g-1"),
        ],
        NODES,
    )
    opa, kube = ScriptedOpa(refuse={"v1"}), RecordingKube()
    rt = runtime(opa, kube, dry_run=False)
    act_on_preemption(rt, plan, pods)
    assert sorted(kube.evicted) == ["v2", "v3"]
    assert rt.summary.get("actions", concern="preempt", action="evict", outcome="denied") == 1


def test_no_plan_left_after_refusals_evicts_nobody_and_says_so_on_the_podgroup() -> None:
    plan, pods = planned(
        [victim("v1", "n1"), victim("v2", "n2"), gang_pod("g-0"), gang_pod("g-1")], NODES[:2]
    )
    opa, kube = ScriptedOpa(refuse={"v2"}), RecordingKube()
    rt = runtime(opa, kube, dry_run=False)
    act_on_preemption(rt, plan, pods)
    assert kube.evicted == [] and kube.patched == []
    (event,) = kube.events
    assert event["involvedObject"]["kind"] == "PodGroup"
    assert event["involvedObject"]["name"] == "pg-big"
    assert event["reason"] == "GangPreemptionWaits" and event["type"] == "Warning"
    assert "nobody is evicted" in event["message"]


def test_a_gang_without_room_is_counted_logged_and_announced() -> None:
    serving = a_pod("serving").type("inference").gpus(8).priority(100).on("n2")
    plan, pods = planned(
        [victim("v1", "n1"), serving.tolerate(GPU_TOLERATIONS), gang_pod("g-0"), gang_pod("g-1")],
        NODES[:2],
    )
    assert plan.preemptions == []
    opa, kube = ScriptedOpa(), RecordingKube()
    rt = runtime(opa, kube, dry_run=False)
    act_on_preemption(rt, plan, pods)
    assert opa.asked == [] and kube.evicted == []
    assert rt.summary.get("preemptors", state="gang-no-room") == 1
    (event,) = kube.events
    assert (event["involvedObject"]["kind"], event["reason"]) == (
        "PodGroup",
        "GangPreemptionWaits",
    )
    assert "room for only 1" in event["message"]
