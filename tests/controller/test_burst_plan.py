"""Bursting's plan on a snapshot (pure): which waiting pods are admitted to the open tiers, when
the next tier is asked for (and with what estimate), when a tier is closed, and what a team holds
on burst nodes."""

from __future__ import annotations

from typing import Any

from controller.config import parse_config
from controller.decide.burst import (
    BURST_SINCE,
    BURST_TIER,
    plan_bursts,
    tolerations_for,
)
from fleet import karpenter
from tests.controller.builders import NOW, a_node, a_pod
from tests.controller.conftest import config_for

WAIT = 60


def fleet_with_reservation() -> Any:
    found = config_for("ml-research")
    found["pools"]["h100-reserved"] = {**found["pools"]["h100-ondemand"], "teams": ["research"]}
    return parse_config(found)


def waiting(name: str, since: float = NOW - 600, gpus: int = 8) -> Any:
    return a_pod(name).type("training").gpus(gpus).pending(since)


ON_DEMAND = {"key": BURST_TIER, "operator": "Equal", "value": "on-demand", "effect": "NoSchedule"}


def test_the_taint_key_is_the_one_the_nodepools_carry() -> None:
    assert BURST_TIER == karpenter.BURST_TIER


def test_tolerations_per_tier() -> None:
    assert tolerations_for("reserved") == []
    assert tolerations_for("on-demand") == [ON_DEMAND]
    spot = tolerations_for("spot")
    assert spot[0] == ON_DEMAND and spot[1]["value"] == "spot"
    assert {
        "key": "fleetplane.dev/capacity-type",
        "operator": "Exists",
        "effect": "NoSchedule",
    } in (spot)


def test_work_waiting_past_the_wait_asks_for_the_next_tier_with_the_whole_estimate() -> None:
    fleet = fleet_with_reservation()
    pods = [waiting("a").build(), waiting("b").build(), waiting("fresh", since=NOW - 10).build()]
    plan = plan_bursts(pods, [], fleet, {"research": {}}, NOW, wait_seconds=WAIT)
    (ask,) = plan.asks
    assert ask.team == "research" and ask.queue == "research"
    assert ask.claimant.name in {"a", "b"}
    assert [p.name for p in ask.waiting] == sorted(p.name for p in ask.waiting)
    assert {p.name for p in ask.waiting} == {"a", "b"}  # "fresh" has not waited long enough
    pool, given = ask.inputs[0]
    assert (given["from_tier"], given["to_tier"]) == ("reserved", "on-demand")
    price = fleet.models[pool.model].price_per_hour_usd["on-demand"]
    runtime = fleet.workload_types["training"].default_max_runtime_seconds or 3600
    assert given["estimate_usd"] == round(2 * round(8 * price * runtime / 3600, 2), 2)
    assert not plan.admits and not plan.closes


def test_an_open_tier_admits_the_pods_that_lack_its_toleration_and_waits_before_the_next() -> None:
    fleet = fleet_with_reservation()
    pods = [waiting("new").build(), waiting("told").tolerate([ON_DEMAND]).build()]
    queues = {"research": {BURST_TIER: "on-demand", BURST_SINCE: str(int(NOW - 30))}}
    plan = plan_bursts(pods, [], fleet, queues, NOW, wait_seconds=WAIT)
    assert [(a.pod.name, a.tolerations) for a in plan.admits] == [("new", [ON_DEMAND])]
    assert not plan.asks  # opened 30 s ago: the admitted work gets its chance first
    later = plan_bursts(pods, [], fleet, queues, NOW + WAIT, wait_seconds=WAIT)
    (ask,) = later.asks
    assert ask.claimant.name == "told"  # the one that had its chance on on-demand
    assert ask.inputs[0][1]["from_tier"] == "on-demand"


def test_pods_pinned_to_a_pool_running_or_of_unknown_teams_are_not_burst_work() -> None:
    fleet = fleet_with_reservation()
    pods = [
        waiting("pinned").select(**{"fleetplane.dev/pool": "h100-reserved"}).build(),
        a_pod("running").type("training").gpus(8).on("gpu-1").build(),
        waiting("stranger").in_ns("elsewhere").build(),
    ]
    plan = plan_bursts(pods, [], fleet, {"research": {}}, NOW, wait_seconds=WAIT)
    assert not plan.asks and not plan.admits


def test_a_team_without_a_queue_is_left_alone() -> None:
    plan = plan_bursts(
        [waiting("a").build()], [], fleet_with_reservation(), {}, NOW, wait_seconds=1
    )
    assert plan.teams == [] and not plan.asks


def test_a_tier_closes_when_nothing_waits_or_runs_on_a_burst_node() -> None:
    fleet = fleet_with_reservation()
    burst_node = a_node("burst-1").gpus(8).label(BURST_TIER, "on-demand").build()
    home_node = a_node("home-1").gpus(8).build()
    queues = {"research": {BURST_TIER: "on-demand", BURST_SINCE: str(int(NOW - 600))}}
    on_burst = a_pod("r").type("training").gpus(8).on("burst-1").build()
    plan = plan_bursts([on_burst], [burst_node, home_node], fleet, queues, NOW, wait_seconds=WAIT)
    assert not plan.closes
    (state,) = plan.teams
    assert state.on_burst == {("on-demand", "h100-80gb"): 8}

    at_home = a_pod("h").type("training").gpus(8).on("home-1").build()
    plan = plan_bursts([at_home], [burst_node, home_node], fleet, queues, NOW, wait_seconds=WAIT)
    (close,) = plan.closes
    assert (close.queue, close.tier) == ("research", "on-demand")

    # a pod still pending (even one that has not waited long) keeps the tier open
    fresh = waiting("fresh", since=NOW - 5).build()
    plan = plan_bursts([fresh], [burst_node], fleet, queues, NOW, wait_seconds=WAIT)
    assert not plan.closes
