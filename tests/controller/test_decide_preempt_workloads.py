"""decide.preempt takes an operator's workload as one gang (issue 30 item 4): the pods a JobSet's
Jobs, a LeaderWorkerSet's StatefulSets or a RayCluster own leave together, with no PodGroup
annotation needed, and one mate that may not be a victim protects the whole workload."""

from __future__ import annotations

from controller.decide.operator_kinds import JOBSET_NAME_LABEL, LWS_NAME_LABEL
from controller.decide.preempt import victim_gangs, workload_key
from tests.controller.builders import NOW, a_node, assert_same
from tests.controller.test_decide_preempt import GANG, plan, victim, waiting


def jobset_pod(name: str, jobset: str, gpus: int, node: str, **kw):
    return (
        victim(name, gpus, node=node, **kw)
        .owned_by("Job", f"{jobset}-node-0", "batch/v1")
        .label(JOBSET_NAME_LABEL, jobset)
    )


def test_an_operators_pods_are_one_gang_keyed_apart_from_podgroups() -> None:
    pods = [
        jobset_pod("tj-0", "tj", 4, "n1").annotate(GANG, "tj").build(),
        jobset_pod("tj-1", "tj", 4, "n2").annotate(GANG, "tj").build(),
        victim("w-0", 2, node="n1")
        .owned_by("StatefulSet", "lws-0", "apps/v1")
        .label(LWS_NAME_LABEL, "lws")
        .build(),
        victim("w-1", 2, node="n2")
        .owned_by("StatefulSet", "lws-0-1", "apps/v1")
        .label(LWS_NAME_LABEL, "lws")
        .build(),
        victim("head", 0, node="n1").owned_by("RayCluster", "rc", "ray.io/v1").build(),
        victim("plain", 1).build(),
    ]
    assert workload_key(pods[0]) == ("ml-research", "JobSet/tj")
    assert workload_key(pods[2]) == ("ml-research", "LeaderWorkerSet/lws")
    assert workload_key(pods[4]) == ("ml-research", "RayCluster/rc")
    assert workload_key(pods[5]) is None
    groups = victim_gangs(pods)
    assert_same(["tj-0", "tj-1"], [p.name for p in groups[("ml-research", "JobSet/tj")]])
    assert_same(["w-0", "w-1"], [p.name for p in groups[("ml-research", "LeaderWorkerSet/lws")]])
    # the PodGroup gang stays for the pending-gang side, which keys by PodGroup
    assert_same(["tj-0", "tj-1"], [p.name for p in groups[("ml-research", "tj")]])
    assert ("ml-research", "RayCluster/rc") not in groups  # one pod: no mates


def test_an_operators_workload_is_a_victim_whole_or_not_at_all() -> None:
    """A JobSet's two pods on two nodes, with no PodGroup: taking the one on n1 takes its mate
    on n2 too; a mate inside its minimum runtime protects the JobSet, and the lone pod on n3 is
    taken instead."""
    nodes = [a_node(n).gpus(8).build() for n in ("n1", "n2", "n3")]
    workload = [jobset_pod("js-0", "js", 8, "n1"), jobset_pod("js-1", "js", 4, "n2")]
    got = plan([*workload, waiting()], nodes[:2])
    (option,) = [got.preemptions[0].options[0]]
    assert_same(("n1", ["js-0"]), (option.node, [v.pod.name for v in option.victims]))
    assert [m.name for m in option.victims[0].mates] == ["js-1"]
    assert option.victims[0].devices == 12

    young = jobset_pod("js-1", "js", 4, "n2", kind="training", started=NOW - 60)
    lone = victim("lone", 8, node="n3")
    got = plan([workload[0], young, lone, waiting()], nodes)
    assert_same(["lone"], [v.pod.name for v in got.preemptions[0].options[0].victims])
