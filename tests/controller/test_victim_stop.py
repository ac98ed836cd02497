"""act.victim_stop and act.owners.stop_subject against a scripted API of the objects the real
operators make: a preemption's victim that is an operator's pod stops its workload's top (never
an eviction), once for the victim and its mates; --dry-run names the top (reads only)."""

from __future__ import annotations

import io
from dataclasses import replace

from controller.act.fairshare import act_on_fair_share
from controller.act.opa import Decision
from controller.act.owners import stop_subject
from controller.act.victim_stop import Stopped, operator_workload, stop_victim_workload
from controller.decide.fairshare import FairSharePlan, Reclaim
from controller.decide.preempt import Candidate
from controller.observe.kube import object_path
from tests.controller.builders import NOW, a_pod
from tests.controller.test_operator_targets import (
    NS,
    RAY,
    TRAINER,
    ObjectsKube,
    item,
    jobset_pod,
    obj,
    ray_pod,
    runtime,
    trainjob_objects,
)


def victim_of(*builders) -> Candidate:
    pods = [b.build() for b in builders]
    return Candidate(
        pod=pods[0],
        priority=0,
        team="research",
        frees=dict(pods[0].demand),
        running_seconds=7200,
        seconds_since_checkpoint=60,
        mates=tuple(pods[1:]),
    )


def test_a_trainjobs_victim_suspends_the_trainjob_and_evicts_nothing() -> None:
    kube = ObjectsKube(*trainjob_objects(suspend=False))
    rt = runtime(kube)
    victim = victim_of(jobset_pod("tj-node-0", 0), jobset_pod("tj-node-1", 0))
    assert operator_workload(victim) is not None
    got = stop_victim_workload(rt, "preempt", victim, "preempted", event_reason="Preempted")
    assert got is Stopped.STOPPED
    [(path, patch)] = kube.patches
    assert path == object_path(TRAINER, "trainjobs", NS, "tj")
    assert patch["spec"] == {"suspend": True}
    # the Event on the TrainJob and on each pod of it
    assert sorted(e["involvedObject"]["kind"] for e in kube.events) == ["Pod", "Pod", "TrainJob"]
    assert {e["reason"] for e in kube.events} == {"Preempted"}
    assert rt.summary.get("actions", concern="preempt", action="stop", outcome="done") == 1


def test_under_dry_run_the_top_is_named_and_nothing_written() -> None:
    kube = ObjectsKube(*trainjob_objects(suspend=False))
    rt = runtime(kube)
    rt.settings = replace(rt.settings, dry_run=True)
    rt.out = io.StringIO()
    victim = victim_of(jobset_pod("tj-node-0", 0))
    assert stop_victim_workload(rt, "preempt", victim, "why", event_reason="Preempted") is (
        Stopped.STOPPED
    )
    assert f"would stop (suspend) TrainJob {NS}/tj: why" in rt.out.getvalue()
    assert kube.patches == [] and kube.events == []
    # idle reclaim and the max-runtime stop name it the same way
    plan = item(jobset_pod("tj-node-0", 0))
    assert plan.target.kind == "JobSet"
    assert stop_subject(rt, plan.target, plan) == f"TrainJob {NS}/tj"


def test_a_workload_that_cannot_be_stopped_keeps_the_victim() -> None:
    """A RayJob KubeRay would fail if suspended: refused, nothing written, the victim stays
    (the planner picks another)."""
    kube = ObjectsKube(
        obj(RAY, "RayJob", "rj"), obj(RAY, "RayCluster", "rj-x", (RAY, "RayJob", "rj"))
    )
    rt = runtime(kube)
    victim = victim_of(ray_pod("w", "rj-x"))
    got = stop_victim_workload(rt, "fairshare", victim, "why", event_reason="FairShareReclaimed")
    assert got is Stopped.REFUSED
    assert kube.patches == [] and kube.events == []
    plan = item(ray_pod("w", "rj-x"))
    assert "nothing would be written" in stop_subject(rt, plan.target, plan)
    rt.settings = replace(rt.settings, dry_run=True)
    rt.out = io.StringIO()
    got = stop_victim_workload(rt, "fairshare", victim, "why", event_reason="FairShareReclaimed")
    assert got is Stopped.REFUSED  # --dry-run says what the act would do
    assert "would stop" not in rt.out.getvalue()


def test_a_plain_pod_is_no_operators() -> None:
    assert operator_workload(victim_of(a_pod("p").gpus(1).on("n1"))) is None


class Allowing:
    """A policy that allows every victim (the act side's own steps are under test here)."""

    def decide(self, name: str, input: dict) -> Decision:
        return Decision(allow=True, reasons=("allowed by the test",))


def test_fair_share_stops_an_operators_workload_and_counts_its_pods_freed() -> None:
    kube = ObjectsKube(*trainjob_objects(suspend=False))
    rt = runtime(kube)
    rt.opa = Allowing()  # type: ignore[assignment]
    victim = victim_of(jobset_pod("tj-node-0", 0), jobset_pod("tj-node-1", 0))
    claimant = a_pod("waiting").in_ns("analytics").gpus(2).pending(NOW - 600).build()
    reclaim = Reclaim(
        claimant=claimant,
        team="analytics",
        pool=("nvidia.com/gpu", ""),
        priority=0,
        pending_seconds=600,
        node="n1",
        held=0,
        deserved=4.0,
        victims=(victim,),
        victim_held={"research": 8},
        deserved_of={"research": 4.0},
        reclaimable_of={"research": True},
    )
    freed = act_on_fair_share(rt, FairSharePlan(reclaims=[reclaim], capacity={reclaim.pool: 8}))
    assert freed == {victim.pod.uid, *(m.uid for m in victim.mates)}
    [(path, patch)] = kube.patches
    assert path == object_path(TRAINER, "trainjobs", NS, "tj")
    assert patch["spec"] == {"suspend": True}
    assert {e["reason"] for e in kube.events} >= {"FairShareReclaimed"}
    assert rt.summary.get("actions", concern="fairshare", action="evict", outcome="done") == 0
