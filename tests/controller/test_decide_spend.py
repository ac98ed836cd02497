"""Unit tests of decide.spend: pod cost, the accumulator fold, thresholds (pure)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import orjson
import pytest

from controller.decide.spend import (
    MAX_TRACKED_PODS,
    Accumulator,
    month_of,
    month_start,
    plan_spend,
    pod_cost,
    pod_key,
    team_spend,
)
from tests.controller.builders import A100, NOW, PodBuilder, a_node, a_pod, assert_same, fleet

NODES = {
    "h100-0": a_node("h100-0").gpus(8).build(),
    "a100-0": a_node("a100-0").gpus(8, A100).spot().build(),
    "tpu-0": a_node("tpu-0").tpus(4).build(),
    "cpu-0": a_node("cpu-0").build(),
}
MONTH_START = month_start(NOW)


@dataclass(frozen=True)
class Case:
    name: str
    pod: PodBuilder
    want_usd: float | None


CASES = [
    Case(
        "8 H100 on-demand for 2 h",
        a_pod("a").gpus(8).on("h100-0", started=NOW - 7200),
        8 * 12.29 * 2,
    ),
    Case("2 A100 spot for 1 h", a_pod("b").gpus(2).on("a100-0", started=NOW - 3600), 2 * 1.23),
    Case(
        "4 TPU chips for 30 min", a_pod("c").tpus(4).on("tpu-0", started=NOW - 1800), 4 * 1.2 * 0.5
    ),
    Case(
        "started last month: clipped to the month start",
        a_pod("d").gpus(1).on("h100-0", started=MONTH_START - 86400),
        12.29 * (NOW - MONTH_START) / 3600,
    ),
    Case(
        "finished an hour after starting",
        a_pod("e").gpus(1).on("h100-0", started=NOW - 7200).finished(NOW - 3600),
        12.29,
    ),
    Case("namespace of no team", a_pod("f").in_ns("other").gpus(1).on("h100-0"), None),
    Case("unpriced node", a_pod("g").gpus(1).on("cpu-0"), None),
    Case("pending", a_pod("h").gpus(1).pending(NOW - 60), None),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_pod_cost(case: Case) -> None:
    pod = case.pod.build()
    cost = pod_cost(pod, NODES.get(pod.node_name or ""), fleet(), NOW)
    got = None if cost is None else round(cost.usd, 6)
    want = None if case.want_usd is None else round(case.want_usd, 6)
    assert_same(want, got, "usd")


def costs_of(*builders: PodBuilder) -> list:
    found = []
    for builder in builders:
        pod = builder.build()
        cost = pod_cost(pod, NODES[pod.node_name or ""], fleet(), NOW)
        assert cost is not None
        found.append(cost)
    return found


def fold(costs: list, previous: Accumulator | None, budget: float = 50000):
    return team_spend(
        "research", costs, previous, budget_usd=budget, warn_ratio=0.8, deny_ratio=1.0, now=NOW
    )


def test_deleted_pods_are_folded_into_gone_exactly_once() -> None:
    live = costs_of(a_pod("a").uid("u-a").gpus(1).on("h100-0", started=NOW - 3600))
    previous = Accumulator(
        month=month_of(NOW), gone_usd=100.0, pods={pod_key("u-a"): 10.0, pod_key("u-gone"): 50.0}
    )
    first = fold(live, previous)
    assert_same(150.0, round(first.gone_usd, 6), "gone after the first fold")
    assert_same({pod_key("u-a")}, set(first.accumulator.pods), "tracked pods")
    assert round(first.usd, 4) == round(150.0 + 12.29, 4)
    again = fold(live, first.accumulator)  # a second pass (or a retry) folds nothing twice
    assert_same(round(first.usd, 6), round(again.usd, 6), "usd after a repeated pass")
    assert again.folded_pods == 0


def test_a_new_month_starts_from_zero() -> None:
    previous = Accumulator(
        month="2026-10", gone_usd=9999.0, pods={"old": 10.0}, alerts=("warn", "deny")
    )
    spend = fold([], previous)
    assert_same((0.0, {}, ()), (spend.usd, spend.accumulator.pods, spend.accumulator.alerts))


def test_thresholds_are_announced_once_per_month() -> None:
    live = costs_of(a_pod("a").gpus(8).on("h100-0", started=NOW - 7200))  # 196.64 USD
    first = fold(live, None, budget=200)
    assert_same(("warn",), first.crossed, "crossed at 98%")
    second = fold(live, first.accumulator, budget=200)
    assert_same((), second.crossed, "nothing new")
    third = fold(live, second.accumulator, budget=150)
    assert_same(("deny",), third.crossed, "deny once over 100%")
    assert_same(("warn", "deny"), third.accumulator.alerts)


def test_accumulator_round_trips_and_tolerates_garbage() -> None:
    acc = Accumulator(month="2026-11", gone_usd=1.5, pods={"u": 2.25}, alerts=("warn",))
    assert_same(acc, Accumulator.decode(acc.encode()))
    assert Accumulator.decode("{not json") is None
    assert Accumulator.decode('{"pods": 3}') is None
    assert Accumulator.decode('{"v": 3, "month": "2026-11"}') is None  # a version it cannot read
    assert Accumulator.decode(None) is None


def test_a_version_1_accumulator_is_read_by_pod_key() -> None:
    uid = "5232dfdf-8e91-4bb8-80b0-ce10ebfb97cf"
    old = orjson.dumps(
        {"v": 1, "month": "2026-11", "gone": 3.5, "pods": {uid: 12.3456}, "alerts": []}
    ).decode()
    acc = Accumulator.decode(old)
    assert_same(Accumulator(month="2026-11", gone_usd=3.5, pods={"5232dfdf8e914bb8": 12.3456}), acc)
    live = costs_of(a_pod("a").uid(uid).gpus(1).on("h100-0", started=NOW - 3600))
    folded = fold(live, acc)  # the same pod: nothing is folded, its larger known cost is kept
    assert_same((0, 3.5), (folded.folded_pods, folded.gone_usd))
    assert_same({"5232dfdf8e914bb8": 12.3456}, folded.accumulator.pods)


def test_the_accumulator_of_a_full_team_stays_well_under_the_annotation_limit() -> None:
    import uuid

    pods = {pod_key(str(uuid.uuid4())): 123456.789 for _ in range(MAX_TRACKED_PODS)}
    text = Accumulator(month="2026-11", gone_usd=98765.4321, pods=pods, alerts=("warn",)).encode()
    assert len(text) < 120_000, len(text)  # of the 262,144 bytes all annotations may use


def test_plan_spend_homes_and_team_totals() -> None:
    pods = [
        a_pod("a").gpus(8).on("h100-0", started=NOW - 3600).build(),
        a_pod("b").in_ns("analytics").gpus(2).on("a100-0", started=NOW - 3600).build(),
    ]
    plan = plan_spend(pods, NODES, {"ml-research": object()}, fleet(), {}, NOW)
    assert_same(
        {"research": round(8 * 12.29, 4), "analytics": round(2 * 1.23, 4)},
        {team: round(s.usd, 4) for team, s in plan.teams.items()},
    )
    assert_same({"research": "ml-research", "analytics": None}, plan.home)


def test_the_remembered_month_is_the_clocks_month_to_the_microsecond() -> None:
    """`month_of` and `month_start` remember the last month asked; every answer, in any
    order and right at the boundaries, is the one reading the clock gives."""

    def direct(now: float) -> tuple[str, float]:
        moment = dt.datetime.fromtimestamp(now, dt.UTC)
        first = dt.datetime(moment.year, moment.month, 1, tzinfo=dt.UTC)
        return moment.strftime("%Y-%m"), first.timestamp()

    times = [NOW + k * 3_600.5 for k in range(-2_000, 2_000, 7)]
    for year, month in [(2025, 12), (2026, 1), (2026, 2), (2026, 3), (2028, 2), (2028, 3)]:
        boundary = dt.datetime(year, month, 1, tzinfo=dt.UTC).timestamp()
        times += [boundary + d for d in (-1.5, -1.0, -0.5, -1e-6, -4e-7, 0.0, 1e-6, 0.5)]
    for now in sorted(times) + sorted(times, reverse=True) + times:
        assert (month_of(now), month_start(now)) == direct(now), now
