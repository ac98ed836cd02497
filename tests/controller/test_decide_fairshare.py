"""Unit tests of decide.fairshare: deserved shares, who is served, which victims (pure)."""

from __future__ import annotations

import dataclasses

from controller.decide.fairshare import (
    FairSharePlan,
    QueueShare,
    opa_input,
    plan_fair_share,
    queue_from_api,
    water_fill,
)
from controller.decide.workloads import GANG_ANNOTATION
from controller.observe.model import Node, Pod
from tests.controller.builders import GPU_TOLERATIONS, NOW, PodBuilder, a_node, a_pod, fleet

H100_POOL = ("nvidia.com/gpu", "h100-80gb")


def queues(research: int = 1, analytics: int = 1, **kw: bool) -> dict[str, QueueShare]:
    return {
        "research": QueueShare(
            name="research", weight=research, reclaimable=kw.get("research_reclaimable", True)
        ),
        "analytics": QueueShare(name="analytics", weight=analytics, reclaimable=True),
    }


def nodes(count: int) -> dict[str, Node]:
    return {f"h{i}": a_node(f"h{i}").gpus(8).build() for i in range(count)}


def running(name: str, node: str, *, gpus: int = 8, kind: str = "batch", **kw: float) -> PodBuilder:
    pod = (
        a_pod(name)
        .in_ns("ml-research")
        .type(kind)
        .gpus(gpus)
        .priority(100)
        .on(node, started=kw.get("started", NOW - 7200))
        .tolerate(GPU_TOLERATIONS)
    )
    if "checkpoint" in kw:
        pod = pod.checkpoint(kw["checkpoint"])
    return pod


def waiting(name: str, *, gpus: int = 8, since: float = NOW - 1200) -> PodBuilder:
    return (
        a_pod(name)
        .in_ns("analytics")
        .type("batch")
        .gpus(gpus)
        .priority(100)
        .pending(since)
        .tolerate(GPU_TOLERATIONS)
    )


def plan(
    pods: list[PodBuilder], count: int, q: dict[str, QueueShare] | None = None, **kw: object
) -> FairSharePlan:
    built: list[Pod] = [p.build() for p in pods]
    return plan_fair_share(
        built,
        nodes(count),
        [],
        fleet(),
        q or queues(),
        lambda p: p.priority,
        NOW,
        pending_seconds=600,
        **kw,  # type: ignore[arg-type]
    )


def victims(result: FairSharePlan) -> list[str]:
    return [v.pod.name for r in result.reclaims for v in r.victims]


def test_water_fill_divides_by_weight_and_gives_back_what_a_team_does_not_need() -> None:
    assert water_fill(32, {"a": 40, "b": 40}, {"a": 1, "b": 3}) == {"a": 8.0, "b": 24.0}
    assert water_fill(32, {"a": 4, "b": 40}, {"a": 1, "b": 1}) == {"a": 4.0, "b": 28.0}
    assert water_fill(32, {"a": 0, "b": 40}, {"a": 1, "b": 1}) == {"a": 0.0, "b": 32.0}
    assert water_fill(32, {"a": 10, "b": 10}, {"a": 1, "b": 1}) == {"a": 10.0, "b": 10.0}


def test_a_queue_is_read_with_volcanos_defaults() -> None:
    raw = {
        "metadata": {"name": "research"},
        "spec": {
            "weight": 3,
            "reclaimable": False,
            "guarantee": {"resource": {"nvidia.com/gpu": "4"}},
        },
    }
    assert queue_from_api(raw) == QueueShare(
        name="research", weight=3, reclaimable=False, guarantee={"nvidia.com/gpu": 4}
    )
    assert queue_from_api({"metadata": {"name": "q"}, "spec": {}}) == QueueShare(
        name="q", weight=1, reclaimable=True
    )
    assert queue_from_api({"metadata": {}}) is None


def test_equal_weights_take_back_half_least_work_lost_first() -> None:
    pods = [
        running("r0", "h0", checkpoint=NOW - 3000),
        running("r1", "h1", checkpoint=NOW - 60),
        running("r2", "h2", checkpoint=NOW - 600),
        running("r3", "h3"),  # never checkpointed: two hours at stake
        waiting("a0"),
        waiting("a1"),
        waiting("a2"),
    ]
    result = plan(pods, 4)
    shares = {s.team: (s.held, s.pending, s.deserved) for s in result.shares}
    assert shares == {"research": (32, 0, 16.0), "analytics": (0, 24, 16.0)}
    assert victims(result) == ["r1", "r2"]
    assert [r.claimant.name for r in result.reclaims] == ["a0", "a1"]
    # the third waits: analytics holds its share once two pods run
    assert [p.name for p, _ in result.waiting] == []


def test_weights_one_to_three_take_back_three_quarters() -> None:
    pods = [running(f"r{i}", f"h{i}", checkpoint=NOW - 100 * (i + 1)) for i in range(4)]
    pods += [waiting(f"a{i}") for i in range(4)]
    result = plan(pods, 4, queues(research=1, analytics=3))
    assert {s.team: s.deserved for s in result.shares} == {"research": 8.0, "analytics": 24.0}
    assert victims(result) == ["r0", "r1", "r2"]


def test_no_reclaim_pushes_the_victim_team_below_its_share() -> None:
    pods = [running(f"r{i}", f"h{i}") for i in range(3)] + [waiting("a0"), waiting("a1")]
    result = plan(pods, 3)
    assert {s.team: s.deserved for s in result.shares} == {"research": 12.0, "analytics": 12.0}
    assert len(victims(result)) == 1  # research keeps 16; one more would leave it 8 < 12
    assert [p.name for p, _ in result.waiting] == ["a1"]
    assert "without taking them below theirs" in result.waiting[0][1]


def test_a_team_at_its_share_takes_nothing() -> None:
    pods = [
        running("r0", "h0"),
        running("r1", "h1"),
        running("a-run", "h2").in_ns("analytics"),
        waiting("a0"),
    ]
    result = plan(pods, 3)
    # 24 GPUs: research 16, analytics 8 running + 8 pending: 12 each; analytics is under its
    # share but one pod of 8 would leave research 8 < 12, so nothing comes back
    assert victims(result) == []
    pods.append(waiting("a1"))
    pods[:2] = [running("r0", "h0"), running("r1", "h1", gpus=4), running("r2", "h1", gpus=4)]
    result = plan(pods, 3)  # a pod of 4 does not make room for a pod of 8
    assert victims(result) == []


def test_a_queue_not_reclaimable_keeps_what_it_holds() -> None:
    pods = [running(f"r{i}", f"h{i}").build() for i in range(4)] + [waiting("a0").build()]
    result = plan_fair_share(
        pods,
        nodes(4),
        [],
        fleet(),
        queues(research_reclaimable=False),
        lambda p: p.priority,
        NOW,
        pending_seconds=600,
    )
    assert victims(result) == []
    assert [p.name for p, _ in result.waiting] == ["a0"]


def test_minimum_run_time_and_short_waits_are_honoured() -> None:
    young = [
        running(f"r{i}", f"h{i}", kind="training", started=NOW - 300).build() for i in range(2)
    ]
    result = plan_fair_share(
        [*young, waiting("a0").build()],
        nodes(2),
        [],
        fleet(),
        queues(),
        lambda p: p.priority,
        NOW,
        pending_seconds=600,
    )
    assert victims(result) == []  # training runs at least 600s
    fresh = [running(f"r{i}", f"h{i}").build() for i in range(2)]
    result = plan_fair_share(
        [*fresh, waiting("a0", since=NOW - 60).build()],
        nodes(2),
        [],
        fleet(),
        queues(),
        lambda p: p.priority,
        NOW,
        pending_seconds=600,
    )
    assert victims(result) == []
    assert "reclaims after 600s" in result.waiting[0][1]


def test_a_victim_gang_goes_whole() -> None:
    gang = [
        running(f"g{i}", f"h{i}", gpus=4, checkpoint=NOW - 10).annotate(GANG_ANNOTATION, "pg")
        for i in range(2)
    ]
    others = [
        running("r0", "h0", gpus=4, checkpoint=NOW - 5000),
        running("r1", "h1", gpus=4, checkpoint=NOW - 5000),
    ]
    result = plan([*gang, *others, waiting("a0", gpus=4), waiting("a1", gpus=4)], 2)
    # 16 GPUs, 8 deserved each: the gang (least work lost) goes whole, its mate's node then
    # holds the second pod without another victim
    assert len(result.reclaims) == 1
    (victim,) = result.reclaims[0].victims
    assert victim.pod.name in ("g0", "g1")
    assert [m.name for m in victim.mates] == ["g1" if victim.pod.name == "g0" else "g0"]
    request = opa_input(result.reclaims[0], victim, 16, 16, NOW)
    assert request["victim"]["devices"] == 8
    assert request["victim"]["gang"] == [victim.pod.key, victim.mates[0].key]
    assert request["claimant"]["team"] == "analytics"
    assert request["victim"]["team_deserved"] == 8.0


def test_a_pending_gang_is_served_whole_or_not_at_all() -> None:
    pods = [running(f"r{i}", f"h{i}").build() for i in range(4)]
    members = [waiting(f"a{i}").annotate(GANG_ANNOTATION, "pg").build() for i in range(3)]
    result = plan_fair_share(
        pods + members,
        nodes(4),
        [],
        fleet(),
        queues(),
        lambda p: p.priority,
        NOW,
        pending_seconds=600,
        min_members={("analytics", "pg"): 3},
        group_phases={("analytics", "pg"): "Inqueue"},
    )
    # three pods of 8 would leave research 8 < 16: the gang waits, nobody is evicted
    assert victims(result) == []
    assert "room for all 3 pods" in result.waiting[0][1]
    result = plan_fair_share(
        pods + members[:2],
        nodes(4),
        [],
        fleet(),
        queues(),
        lambda p: p.priority,
        NOW,
        pending_seconds=600,
        min_members={("analytics", "pg"): 2},
        group_phases={("analytics", "pg"): "Pending"},
    )
    assert len(victims(result)) == 2


def test_capacity_leaves_out_cordoned_nodes_and_work_outside_every_team() -> None:
    cordoned = dataclasses.replace(a_node("h3").gpus(8).build(), unschedulable=True)
    pool = {**nodes(3), "h3": cordoned}
    pods = [
        running("r0", "h0").build(),
        running("other", "h1").in_ns("default").build(),  # no team: its 8 are nobody's share
        running("r3", "h3").build(),  # on the cordoned node: held, never capacity
        waiting("a0").build(),
        waiting("a1").build(),
    ]
    result = plan_fair_share(
        pods, pool, [], fleet(), queues(), lambda p: p.priority, NOW, pending_seconds=600
    )
    assert result.capacity[H100_POOL] == 16
    assert {s.team: (s.held, s.deserved) for s in result.shares} == {
        "research": (16, 8.0),
        "analytics": (0, 8.0),
    }
