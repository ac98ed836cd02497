"""Unit tests of decide.preempt: the comparator, the minimal victim set, node choice (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from controller.decide.preempt import Candidate, fits, plan_preemption, select_victims, victim_order
from controller.decide.workloads import team_usage
from controller.observe.model import DisruptionBudget, Node, Pod
from tests.controller.builders import (
    GPU_TOLERATIONS,
    NOW,
    PodBuilder,
    a_node,
    a_pod,
    assert_same,
    fleet,
)


def victim(
    name: str,
    gpus: int = 1,
    *,
    priority: int = 100,
    node: str = "n1",
    kind: str = "batch",
    started: float = NOW - 7200,
    ns: str = "ml-research",
) -> PodBuilder:
    return (
        a_pod(name)
        .in_ns(ns)
        .type(kind)
        .gpus(gpus)
        .priority(priority)
        .on(node, started=started)
        .tolerate(GPU_TOLERATIONS)
    )


def waiting(
    name: str = "big", gpus: int = 8, priority: int = 5000, since: float = NOW - 1200
) -> PodBuilder:
    return (
        a_pod(name)
        .type("training")
        .gpus(gpus)
        .priority(priority)
        .pending(since)
        .tolerate(GPU_TOLERATIONS)
    )


def plan(
    pods: list[PodBuilder],
    nodes: list[Node],
    pdbs: list[DisruptionBudget] | None = None,
    mutate=None,
):
    built: list[Pod] = [p.build() for p in pods]
    return plan_preemption(
        built,
        {n.name: n for n in nodes},
        pdbs or [],
        fleet(mutate),
        lambda p: p.priority,
        NOW,
        pending_seconds=600,
    )


def cand(name: str, since_checkpoint: float, priority: int, devices: int) -> Candidate:
    return Candidate(
        pod=a_pod(name).gpus(devices).on("n1").build(),
        priority=priority,
        team="research",
        frees={"nvidia.com/gpu": devices},
        running_seconds=7200,
        seconds_since_checkpoint=since_checkpoint,
    )


def test_comparator_tie_breakers_in_order() -> None:
    pods = [
        cand("e", 300, 100, 1),
        cand("d", 300, 100, 2),  # 3. more devices after fewer
        cand("c", 300, 500, 1),  # 2. higher priority after lower
        cand("a", 60, 900, 8),  # 1. least time since checkpoint first, whatever else
        cand("b", 300, 100, 1),  # 4. name breaks the last tie
    ]
    got = [c.pod.name for c in sorted(pods, key=victim_order)]
    assert_same(["a", "b", "e", "d", "c"], got, "victim order")


@dataclass(frozen=True)
class SelectCase:
    name: str
    candidates: list[tuple[str, int]]
    need: int
    want: list[str] | None = field(default_factory=list)


SELECT = [
    SelectCase("first fits", [("a", 8), ("b", 8)], 8, ["a"]),
    SelectCase("greedy then pruned to the minimum", [("a", 1), ("b", 8)], 8, ["b"]),
    SelectCase("two needed", [("a", 4), ("b", 2), ("c", 4)], 8, ["a", "c"]),
    SelectCase("not enough", [("a", 2), ("b", 2)], 8, None),
    SelectCase("nothing needed", [("a", 2)], 0, []),
]


@pytest.mark.parametrize("case", SELECT, ids=[c.name for c in SELECT])
def test_select_victims(case: SelectCase) -> None:
    candidates = [cand(name, i, 100, devices) for i, (name, devices) in enumerate(case.candidates)]
    got = select_victims(candidates, {"nvidia.com/gpu": case.need})
    assert_same(case.want, None if got is None else [c.pod.name for c in got])


def test_chooses_the_node_needing_fewest_victims() -> None:
    nodes = [a_node("n1").gpus(8).build(), a_node("n2").gpus(8).build()]
    pods = [
        victim("n1-a", 4, node="n1"),
        victim("n1-b", 4, node="n1"),
        victim("n2-a", 8, node="n2"),
        waiting(),
    ]
    got = plan(pods, nodes)
    assert len(got.preemptions) == 1
    option = got.preemptions[0].options[0]
    assert_same(("n2", ["n2-a"]), (option.node, [v.pod.name for v in option.victims]))


@dataclass(frozen=True)
class EligibilityCase:
    name: str
    victim: PodBuilder
    want_victim: bool


ELIGIBILITY = [
    EligibilityCase("lower priority batch", victim("v"), True),
    EligibilityCase("equal priority", victim("v", priority=5000), False),
    EligibilityCase("exempt", victim("v").exempt(), False),
    EligibilityCase("labelled not preemptible", victim("v").preemptible(False), False),
    EligibilityCase(
        "inference is not preemptible by default", victim("v", kind="inference"), False
    ),
    EligibilityCase(
        "training inside its minimum runtime", victim("v", kind="training", started=NOW - 60), False
    ),
    EligibilityCase("training past its minimum runtime", victim("v", kind="training"), True),
    EligibilityCase("terminating already", victim("v").deleting(), False),
    EligibilityCase(
        "other team would fall below its guarantee",
        victim("v", 8, ns="analytics"),  # analytics holds 8, guaranteed 2
        False,
    ),
]


@pytest.mark.parametrize("case", ELIGIBILITY, ids=[c.name for c in ELIGIBILITY])
def test_victim_eligibility(case: EligibilityCase) -> None:
    got = plan([case.victim, waiting()], [a_node("n1").gpus(8).build()])
    victims = [v.pod.name for p in got.preemptions for v in p.options[0].victims]
    assert_same(["v"] if case.want_victim else [], victims)


def test_other_team_above_its_guarantee_may_lose_a_pod() -> None:
    pods = [victim("v", 8, ns="analytics"), victim("w", 2, ns="analytics", node="n2"), waiting()]
    got = plan(pods, [a_node("n1").gpus(8).build(), a_node("n2").gpus(2).build()])
    assert_same(["v"], [v.pod.name for v in got.preemptions[0].options[0].victims])


def test_never_below_the_victim_teams_guarantee() -> None:
    def raise_guarantee(doc):
        doc["teams"]["analytics"]["guaranteed"]["nvidia.com/gpu"] = 8

    got = plan(
        [victim("v", 8, ns="analytics"), waiting()],
        [a_node("n1").gpus(8).build()],
        mutate=raise_guarantee,
    )
    assert got.preemptions == []
    assert "no node" in got.waiting[0][1]


def test_pdb_without_disruptions_left_protects_its_pods() -> None:
    pdb = DisruptionBudget(
        namespace="ml-research",
        name="keep",
        selector={"matchLabels": {"app": "keep"}},
        disruptions_allowed=0,
    )
    pods = [victim("kept", 8).label("app", "keep"), victim("other", 8, node="n2"), waiting()]
    got = plan(pods, [a_node("n1").gpus(8).build(), a_node("n2").gpus(8).build()], [pdb])
    assert_same(["other"], [v.pod.name for v in got.preemptions[0].options[0].victims])


def test_pending_too_briefly_waits() -> None:
    got = plan([victim("v", 8), waiting(since=NOW - 60)], [a_node("n1").gpus(8).build()])
    assert got.preemptions == []
    assert "preempts after 600s" in got.waiting[0][1]


def test_terminating_pods_count_as_free_so_a_repeat_pass_takes_no_more() -> None:
    pods = [victim("gone", 8).deleting(), victim("v2", 8, node="n1"), waiting()]
    node = a_node("n1").gpus(16).build()
    got = plan(pods, [node])
    assert got.preemptions == []
    assert "terminating" in got.waiting[0][1]


def test_two_preemptors_do_not_share_the_same_victims() -> None:
    pods = [
        victim("v1", 8, node="n1"),
        victim("v2", 8, node="n2"),
        waiting("p1"),
        waiting("p2", since=NOW - 900),
    ]
    got = plan(pods, [a_node("n1").gpus(8).build(), a_node("n2").gpus(8).build()])
    chosen = [
        (p.preemptor.name, [v.pod.name for v in p.options[0].victims]) for p in got.preemptions
    ]
    assert_same([("p1", ["v1"]), ("p2", ["v2"])], chosen)


def test_fits_checks_taints_selectors_and_readiness() -> None:
    pod = waiting().select(**{"fleetplane.dev/pool": "h100"}).build()
    ok = a_node("n").gpus(8).label("fleetplane.dev/pool", "h100").build()
    assert fits(pod, ok)
    assert not fits(pod, a_node("n").gpus(8).build())  # selector
    assert not fits(
        pod, a_node("n").gpus(8).label("fleetplane.dev/pool", "h100").spot().build()
    )  # spot taint
    assert not fits(
        pod, a_node("n").gpus(8).label("fleetplane.dev/pool", "h100").not_ready().build()
    )
    assert not fits(
        pod, a_node("n").gpus(4).label("fleetplane.dev/pool", "h100").build()
    )  # too small


def test_a_pod_this_pass_already_frees_is_not_taken_again() -> None:
    # "reclaimed" is being removed by idle reclamation in this pass: its 4 GPUs already count
    # as free. Taking it again as a victim would count them twice and plan too few victims.
    pods = [
        victim("reclaimed", 4, node="n1"),
        victim("other", 4, node="n1"),
        waiting(gpus=8),
    ]
    built = [p.build() for p in pods]
    reclaimed = next(p for p in built if p.name == "reclaimed")
    got = plan_preemption(
        built,
        {"n1": a_node("n1").gpus(8).build()},
        [],
        fleet(),
        lambda p: p.priority,
        NOW,
        pending_seconds=600,
        freeing=frozenset({reclaimed.uid}),
    )
    assert len(got.preemptions) == 1
    option = got.preemptions[0].options[0]
    assert_same(["other"], [v.pod.name for v in option.victims], "victims")
    assert_same(["other"], [c.pod.name for c in option.candidates], "candidates")


def test_equal_priority_across_teams_is_never_planned_even_inside_the_guarantee() -> None:
    # research (guaranteed 16 GPUs, holding none) waits; analytics holds 10 (guaranteed 2) at
    # the same priority. The preempt policy requires strictly higher priority for every
    # victim, so planning these would only be refused by OPA.
    pods = [
        victim("same", 8, ns="analytics", priority=5000),
        victim("w", 2, ns="analytics", node="n2", priority=5000),
        waiting(priority=5000),
    ]
    got = plan(pods, [a_node("n1").gpus(8).build(), a_node("n2").gpus(2).build()])
    assert got.preemptions == []
    assert "no node" in got.waiting[0][1]


def test_a_preemptor_of_unknown_workload_type_waits() -> None:
    got = plan([victim("v", 8), waiting().type("no-such-type")], [a_node("n1").gpus(8).build()])
    assert got.preemptions == []
    assert "unknown" in got.waiting[0][1]


def test_two_victims_of_one_team_together_never_take_it_below_its_guarantee() -> None:
    # analytics (guaranteed 2 GPUs) holds a1 and a2, 2 GPUs each. Each alone may go (4 - 2 >= 2),
    # but research needs all 4 GPUs of n1: both together would leave analytics with 0.
    pods = [victim("a1", 2, ns="analytics"), victim("a2", 2, ns="analytics"), waiting(gpus=4)]
    got = plan(pods, [a_node("n1").gpus(4).build()])
    assert got.preemptions == []
    assert "no node" in got.waiting[0][1]


def test_a_victim_that_would_break_the_guarantee_is_passed_over_for_the_next() -> None:
    # analytics (guaranteed 4) holds a1, a2 (2 GPUs each on n1) and keep (2 on n2): it may lose
    # 2 of its 6 GPUs, so either a1 or a2, not both. In victim order (a1, a2, r) research takes
    # a1, passes over a2, and takes r, a pod of its own team (priority alone orders it).
    pods = [
        victim("a1", 2, ns="analytics", started=NOW - 7000),
        victim("a2", 2, ns="analytics", started=NOW - 8000),
        victim("r", 2, started=NOW - 9000),
        victim("keep", 2, ns="analytics", node="n2"),
        waiting(gpus=4),
    ]

    def guarantee_four(doc):
        doc["teams"]["analytics"]["guaranteed"]["nvidia.com/gpu"] = 4

    got = plan(
        pods,
        [a_node("n1").gpus(6).build(), a_node("n2").gpus(2).not_ready().build()],
        mutate=guarantee_four,
    )
    option = got.preemptions[0].options[0]
    assert_same(["a1", "r"], sorted(v.pod.name for v in option.victims))


@pytest.mark.parametrize("how", ["terminating", "freed this pass"])
def test_a_teams_terminating_or_freed_pods_do_not_count_towards_its_guarantee(how: str) -> None:
    # analytics (guaranteed 2) holds v (2 GPUs on n1) and t (2 GPUs on n2, a node research
    # cannot use). t is going: analytics really keeps only v, which it may not lose.
    gone = victim("t", 2, ns="analytics", node="n2")
    if how == "terminating":
        gone = gone.deleting()
    pods = [victim("v", 2, ns="analytics"), gone, waiting(gpus=2)]
    built = [p.build() for p in pods]
    t = next(p for p in built if p.name == "t")
    got = plan_preemption(
        built,
        {"n1": a_node("n1").gpus(2).build(), "n2": a_node("n2").gpus(2).not_ready().build()},
        [],
        fleet(),
        lambda p: p.priority,
        NOW,
        pending_seconds=600,
        freeing=frozenset({t.uid}) if how != "terminating" else frozenset(),
    )
    assert got.preemptions == []
    assert "no node" in got.waiting[0][1]


def test_team_usage_leaves_out_terminating_and_freed_pods() -> None:
    pods = [
        victim("v", 2, ns="analytics").build(),
        victim("t", 2, ns="analytics").deleting().build(),
        victim("f", 2, ns="analytics").build(),
    ]
    freed = next(p for p in pods if p.name == "f")
    got = team_usage(pods, fleet(), freeing={freed.uid})
    assert_same({"analytics": {"nvidia.com/gpu": 2}}, got)


GANG = "scheduling.k8s.io/group-name"


def test_a_gang_is_a_victim_whole_or_not_at_all() -> None:
    """A gang of two across two nodes: taking the pod on n1 takes its mate on n2 too (counted
    as work lost); a mate that may not be a victim (inside its minimum runtime) protects the
    gang, and the lone pod on n2 is chosen instead."""
    nodes = [a_node("n1").gpus(8).build(), a_node("n2").gpus(8).build()]
    gang = [
        victim("g-0", 8, node="n1").annotate(GANG, "pg"),
        victim("g-1", 4, node="n2").annotate(GANG, "pg"),
    ]
    got = plan([*gang, waiting()], nodes)
    (option,) = [got.preemptions[0].options[0]]
    assert_same(("n1", ["g-0"]), (option.node, [v.pod.name for v in option.victims]))
    assert [m.name for m in option.victims[0].mates] == ["g-1"]
    assert option.victims[0].devices == 12

    young_mate = victim("g-1", 4, node="n2", kind="training", started=NOW - 60).annotate(GANG, "pg")
    lone = victim("lone", 8, node="n3")
    got = plan([gang[0], young_mate, lone, waiting()], [*nodes, a_node("n3").gpus(8).build()])
    assert_same(["lone"], [v.pod.name for v in got.preemptions[0].options[0].victims])


def test_a_pending_gang_is_not_served_pod_by_pod() -> None:
    pods = [
        victim("v", 8, node="n1"),
        waiting("gang-0").annotate(GANG, "pg-big"),
        waiting("gang-1").annotate(GANG, "pg-big"),
    ]
    got = plan(pods, [a_node("n1").gpus(8).build()])
    assert got.preemptions == []
    assert all("pending gang of 2 pods" in why for _, why in got.waiting)
