"""Unit tests of decide.preempt: the comparator, the minimal victim set, node choice (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from controller.decide.preempt import (
    Candidate,
    fits,
    opa_input,
    plan_preemption,
    select_victims,
    victim_order,
)
from controller.decide.preempt.plan import UNMODELLED_POD_AFFINITY
from controller.decide.workloads import team_usage
from controller.observe.model import DisruptionBudget, Node, Pod, pod_from_api
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
    # the one decision asked for the victim names the whole gang that leaves with it
    asked = opa_input(got.preemptions[0], option.victims[0], fleet(), {}, NOW)["victim"]["gang"]
    assert asked["pods"] == [option.victims[0].pod.key, gang[1].build().key]
    assert sum(asked["devices"].values()) == 12

    young_mate = victim("g-1", 4, node="n2", kind="training", started=NOW - 60).annotate(GANG, "pg")
    lone = victim("lone", 8, node="n3")
    got = plan([gang[0], young_mate, lone, waiting()], [*nodes, a_node("n3").gpus(8).build()])
    assert_same(["lone"], [v.pod.name for v in got.preemptions[0].options[0].victims])


def gang_plan(pods: list[PodBuilder], nodes: list[Node], min_members: dict[str, int], **kw):
    built: list[Pod] = [p.build() for p in pods]
    return plan_preemption(
        built,
        {n.name: n for n in nodes},
        kw.get("pdbs", []),
        fleet(),
        lambda p: p.priority,
        NOW,
        pending_seconds=600,
        min_members={("ml-research", name): n for name, n in min_members.items()},
    )


def gang_pod(name: str, group: str = "pg-big", gpus: int = 8, since: float = NOW - 1200):
    return waiting(name, gpus=gpus, since=since).annotate(GANG, group)


def placed(preemption) -> dict[str, tuple[str, list[str]]]:
    """pod -> (node, victims) of a gang plan."""
    return {
        p.pod.name: (p.option.node, [v.pod.name for v in p.option.victims])
        for p in preemption.gang.placements
    }


def eight_gpu_nodes(*names: str) -> list[Node]:
    return [a_node(name).gpus(8).build() for name in names]


def test_a_pending_gang_whose_podgroup_is_unseen_waits() -> None:
    pods = [victim("v", 8, node="n1"), gang_pod("gang-0"), gang_pod("gang-1")]
    got = plan(pods, eight_gpu_nodes("n1", "n2"))
    assert got.preemptions == []
    assert len(got.waiting) == 1
    assert "PodGroup pg-big was not seen" in got.waiting[0][1]


def test_a_pending_gang_gets_room_for_all_its_pods_at_once_across_nodes() -> None:
    pods = [
        victim("v1", 8, node="n1"),
        victim("v2", 8, node="n2"),
        gang_pod("gang-0"),
        gang_pod("gang-1"),
    ]
    got = gang_plan(pods, eight_gpu_nodes("n1", "n2"), {"pg-big": 2})
    assert got.waiting == [] and got.unserved_gangs == []
    (preemption,) = got.preemptions
    assert preemption.options == () and preemption.gang is not None
    assert_same({"gang-0": ("n1", ["v1"]), "gang-1": ("n2", ["v2"])}, placed(preemption))
    assert preemption.demand == {"nvidia.com/gpu": 16}


def test_no_room_for_the_whole_gang_evicts_nobody_and_says_why() -> None:
    # n2 holds an inference pod (not preemptible): room for one pod of two only.
    pods = [
        victim("v1", 8, node="n1"),
        victim("serving", 8, node="n2", kind="inference"),
        gang_pod("gang-0"),
        gang_pod("gang-1"),
    ]
    got = gang_plan(pods, eight_gpu_nodes("n1", "n2"), {"pg-big": 2})
    assert got.preemptions == []
    (unserved,) = got.unserved_gangs
    assert unserved.key == "ml-research/pg-big"
    assert sorted(p.name for p in unserved.pods) == ["gang-0", "gang-1"]
    assert "needs room for 2 more pod(s) at once" in unserved.reason
    assert "only 1" in unserved.reason and "nobody is evicted" in unserved.reason
    assert [why for _, why in got.waiting] == [unserved.reason]


def test_the_gang_needs_only_min_member_minus_its_running_pods() -> None:
    # minMember 3, one running: two of the three pending pods need room, not three.
    pods = [
        victim("v1", 8, node="n1"),
        victim("v2", 8, node="n2"),
        victim("keep", 8, node="n3", priority=9000),
        waiting("gang-r", gpus=8).on("n4").annotate(GANG, "pg-big"),
        gang_pod("gang-0"),
        gang_pod("gang-1"),
        gang_pod("gang-2"),
    ]
    got = gang_plan(pods, eight_gpu_nodes("n1", "n2", "n3", "n4"), {"pg-big": 3})
    (preemption,) = got.preemptions
    assert_same({"gang-0": ("n1", ["v1"]), "gang-1": ("n2", ["v2"])}, placed(preemption))
    assert (preemption.gang.min_member, preemption.gang.running) == (3, 1)


def test_each_gang_pod_honours_its_node_selector() -> None:
    # The cheapest victim (v-a100, least work lost) sits on a node the gang may not use.
    pool = {"fleetplane.dev/pool": "h100"}
    nodes = [
        a_node("a100").gpus(8).build(),
        a_node("h1").gpus(8).label("fleetplane.dev/pool", "h100").build(),
        a_node("h2").gpus(8).label("fleetplane.dev/pool", "h100").build(),
    ]
    pods = [
        victim("v-a100", 8, node="a100", started=NOW - 3600),
        victim("v-h1", 8, node="h1"),
        victim("v-h2", 8, node="h2"),
        gang_pod("gang-0").select(**pool),
        gang_pod("gang-1").select(**pool),
    ]
    got = gang_plan(pods, nodes, {"pg-big": 2})
    (preemption,) = got.preemptions
    assert_same({"gang-0": ("h1", ["v-h1"]), "gang-1": ("h2", ["v-h2"])}, placed(preemption))


def test_a_victim_gangs_mates_free_room_for_the_next_pod() -> None:
    # One victim gang spans n1 and n2: taking it frees both nodes, so the second pod of the
    # pending gang needs no victim of its own (the lone pod on n3 is spared).
    pods = [
        victim("g-0", 8, node="n1").annotate(GANG, "pg-small"),
        victim("g-1", 8, node="n2").annotate(GANG, "pg-small"),
        victim("lone", 8, node="n3", started=NOW - 9000),
        gang_pod("gang-0"),
        gang_pod("gang-1"),
    ]
    got = gang_plan(pods, eight_gpu_nodes("n1", "n2", "n3"), {"pg-big": 2, "pg-small": 2})
    (preemption,) = got.preemptions
    assert_same({"gang-0": ("n1", ["g-0"]), "gang-1": ("n2", [])}, placed(preemption))
    ((_, taken),) = preemption.gang.victims
    assert [m.name for m in taken.mates] == ["g-1"]


def test_a_gang_with_fewer_unschedulable_pods_than_it_needs_waits() -> None:
    pods = [victim("v1", 8, node="n1"), victim("v2", 8, node="n2"), gang_pod("gang-0")]
    got = gang_plan(pods, eight_gpu_nodes("n1", "n2"), {"pg-big": 2})
    assert got.preemptions == [] and got.unserved_gangs == []
    assert "needs 2 more pod(s)" in got.waiting[0][1]


def test_a_gang_waits_until_its_latest_pod_has_waited_long_enough() -> None:
    pods = [
        victim("v1", 8, node="n1"),
        victim("v2", 8, node="n2"),
        gang_pod("gang-0"),
        gang_pod("gang-1", since=NOW - 60),
    ]
    got = gang_plan(pods, eight_gpu_nodes("n1", "n2"), {"pg-big": 2})
    assert got.preemptions == []
    assert "preempts after 600s" in got.waiting[0][1]


def test_a_pod_beyond_its_gangs_min_member_is_served_alone() -> None:
    pods = [
        victim("v1", 8, node="n1"),
        waiting("gang-r", gpus=8).on("n2").annotate(GANG, "pg-big"),
        gang_pod("gang-extra"),
    ]
    got = gang_plan(pods, eight_gpu_nodes("n1", "n2"), {"pg-big": 1})
    (preemption,) = got.preemptions
    assert preemption.gang is None
    assert_same(
        ("n1", ["v1"]),
        (preemption.options[0].node, [v.pod.name for v in preemption.options[0].victims]),
    )


def test_replanning_without_a_refused_victim_takes_the_next_one() -> None:
    pods = [
        victim("v1", 8, node="n1"),
        victim("v2", 8, node="n2"),
        victim("v3", 8, node="n3", started=NOW - 9000),
        gang_pod("gang-0"),
        gang_pod("gang-1"),
    ]
    got = gang_plan(pods, eight_gpu_nodes("n1", "n2", "n3"), {"pg-big": 2})
    (preemption,) = got.preemptions
    assert sorted(v for _, vs in placed(preemption).values() for v in vs) == ["v1", "v2"]
    refused = next(v.pod.uid for _, v in preemption.gang.victims if v.pod.name == "v1")
    again, _ = preemption.replan(frozenset({refused}))
    assert again is not None
    assert sorted(v.pod.name for _, v in again.victims) == ["v2", "v3"]
    others = frozenset(v.pod.uid for _, v in again.victims) | {refused}
    none, why = preemption.replan(others)
    assert none is None and "nobody is evicted" in why


def test_two_victims_under_one_budget_allowing_one_disruption_are_not_both_planned() -> None:
    pdb = DisruptionBudget(
        namespace="ml-research",
        name="one-at-a-time",
        selector={"matchLabels": {"app": "svc"}},
        disruptions_allowed=1,
    )
    pods = [
        victim("v1", 8, node="n1").label("app", "svc"),
        victim("v2", 8, node="n2").label("app", "svc"),
        gang_pod("gang-0"),
        gang_pod("gang-1"),
    ]
    got = gang_plan(pods, eight_gpu_nodes("n1", "n2"), {"pg-big": 2}, pdbs=[pdb])
    assert got.preemptions == []
    assert len(got.unserved_gangs) == 1


def test_a_later_preemptor_does_not_reuse_a_gangs_victims() -> None:
    pods = [
        victim("v1", 8, node="n1"),
        victim("v2", 8, node="n2"),
        victim("v3", 8, node="n3"),
        gang_pod("gang-0", since=NOW - 2000),
        gang_pod("gang-1", since=NOW - 2000),
        waiting("solo", since=NOW - 1000),
    ]
    got = gang_plan(pods, eight_gpu_nodes("n1", "n2", "n3"), {"pg-big": 2})
    gang, solo = got.preemptions
    taken = {v.pod.name for _, v in gang.gang.victims}
    assert taken == {"v1", "v2"}
    assert [v.pod.name for v in solo.options[0].victims] == ["v3"]


@pytest.mark.parametrize("kind", ["podAffinity", "podAntiAffinity"])
def test_a_preemptor_with_required_pod_affinity_waits_and_evicts_nobody(kind: str) -> None:
    # The gate admits required pod affinity for types that allow it; preemption cannot model
    # it, so it would evict for the pod every pass while the pod never runs.
    raw = waiting().raw()
    term = {"labelSelector": {"matchLabels": {"app": "w"}}, "topologyKey": "kubernetes.io/hostname"}
    raw["spec"]["affinity"] = {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    preemptor = pod_from_api(raw)
    assert preemptor.required_pod_affinity
    got = plan_preemption(
        [victim("v", 8).build(), preemptor],
        {"n1": a_node("n1").gpus(8).build()},
        [],
        fleet(None),
        lambda p: p.priority,
        NOW,
        pending_seconds=600,
    )
    assert got.preemptions == []
    assert got.waiting == [(preemptor, UNMODELLED_POD_AFFINITY)]


def test_a_preferred_pod_affinity_still_preempts() -> None:
    raw = waiting().raw()
    term = {"labelSelector": {"matchLabels": {"app": "w"}}, "topologyKey": "kubernetes.io/hostname"}
    raw["spec"]["affinity"] = {
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": term}
            ]
        }
    }
    preemptor = pod_from_api(raw)
    assert not preemptor.required_pod_affinity
    got = plan_preemption(
        [victim("v", 8).build(), preemptor],
        {"n1": a_node("n1").gpus(8).build()},
        [],
        fleet(None),
        lambda p: p.priority,
        NOW,
        pending_seconds=600,
    )
    assert [p.preemptor.name for p in got.preemptions] == ["big"]
