"""The replay's autoscaler for pools Karpenter scales (`replay.karpenter_rules`), corrected
after holding it against the real Karpenter: largest pods first onto new nodes, and empty
nodes kept for `consolidate_after` plus Karpenter's validation delay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import replay_karpenter
from bench.replay_karpenter import (
    CPU_PER_GPU,
    MEMORY_GIB_PER_GPU,
    ON_DEMAND,
    SHORT,
    SPOT,
    Arrival,
    Curve,
    ModelPod,
    PoolFigures,
    agreement,
    check_scenario,
    model_curve,
    model_settings,
    pool_figures,
)
from fleet.config import FleetConfig, parse_fleet
from replay.accounting import Accounting
from replay.autoscaler import Autoscaler
from replay.events import EventQueue
from replay.fleet import FleetState
from replay.karpenter_rules import (
    KarpenterPool,
    duration_seconds,
    karpenter_pools,
    provisioning_order,
)
from tests.components.component_testkit import minimal_raw_fleet
from tests.localfleet import karpenter_kit

POOLS = {ON_DEMAND: karpenter_kit.ON_DEMAND, SPOT: karpenter_kit.SPOT}
BURST = [
    # in this order (of name, at one instant) first fit needs three 8-GPU nodes, largest
    # first two (6+2, 4+4)
    Arrival("a-two", 0, 30, 1, 2, ON_DEMAND),
    Arrival("b-four", 0, 30, 1, 4, ON_DEMAND),
    Arrival("c-four", 0, 30, 1, 4, ON_DEMAND),
    Arrival("d-six", 0, 30, 1, 6, ON_DEMAND),
]


def fleet(autoscaler: str) -> FleetConfig:
    raw = minimal_raw_fleet()
    karpenter_kit.karpenter_fleet(raw)
    raw["clusters"][0]["autoscaler"] = autoscaler
    if autoscaler == "managed":
        raw["clusters"][0].pop("karpenter")
    return parse_fleet(raw)


def test_durations_read_as_karpenter_writes_them() -> None:
    assert duration_seconds("10m") == 600
    assert duration_seconds("1h30m5s") == 5405
    assert duration_seconds("45s") == 45
    for bad in ("", "10", "5 m", "Never"):
        with pytest.raises(ValueError):
            duration_seconds(bad)


def test_only_the_pools_karpenter_scales_get_its_rules() -> None:
    assert karpenter_pools(fleet("karpenter")) == {
        karpenter_kit.ON_DEMAND: KarpenterPool(consolidate_after=5.0),
        karpenter_kit.SPOT: KarpenterPool(consolidate_after=5.0),
    }
    assert karpenter_pools(fleet("managed")) == {}
    assert KarpenterPool(consolidate_after=600).empty_removal_seconds == 620


def test_karpenter_orders_by_cpu_then_memory_never_by_gpus() -> None:
    class Pod:
        def __init__(self, name: str, cpu: int, memory: int) -> None:
            self.name, self.cpu_milli, self.memory_mib = name, cpu, memory

    pods = [
        Pod("small", 1000, 10),
        Pod("big", 8000, 10),
        Pod("mem", 1000, 99),
        Pod("tie", 1000, 10),
    ]
    assert [p.name for p in provisioning_order(pods)] == ["big", "mem", "small", "tie"]


def nodes_asked(fleet_config: FleetConfig, arrivals: list[Arrival]) -> int:
    """Nodes `Autoscaler.scale_up` asks for, for these pods at once on an empty pool."""
    scenario = check_scenario(fleet_config)
    state = FleetState(
        scenario,
        model_settings(6, 5),
        [],
        horizon=100.0,
        events=EventQueue(),
        accounting=Accounting((0.0, 100.0)),
        resubmit=lambda job, at, restart: None,
    )
    pool = next(p for p in state.pools if p.name == karpenter_kit.ON_DEMAND)
    pods = [
        ModelPod(a, 0, a.gpus, a.gpus * CPU_PER_GPU * 1000, a.gpus * MEMORY_GIB_PER_GPU * 1024)
        for a in arrivals
    ]
    Autoscaler(state).scale_up(pods, 0.0, pools_of=lambda pod: [pool])
    return len(state.live[pool.name])


def test_a_burst_is_packed_largest_first_on_karpenter_pools_only() -> None:
    assert nodes_asked(fleet("karpenter"), BURST) == 2
    assert nodes_asked(fleet("managed"), BURST) == 3


def test_the_scheduler_need_not_follow_karpenters_plan() -> None:
    """Karpenter plans 6+2 and 4+4, but the scheduler places in order of arrival (2 and 4 on
    the first node, 4 on the second): the 6 waits for a third node. The real run did the
    same (docs/replay.md)."""
    curve = model_curve(fleet("karpenter"), BURST, POOLS, model_settings(6, 5), tail=60)
    assert max(live[karpenter_kit.ON_DEMAND] for _, live, _ in curve.samples) == 3


def gone_at(curve_fleet: FleetConfig, arrivals: list[Arrival]) -> list[float]:
    """When the on-demand pool's count fell to zero (the arrivals' pods end at their `end`,
    as the real run deletes them)."""
    curve = model_curve(curve_fleet, arrivals, POOLS, model_settings(6, 5), tail=60)
    counts = [(at, live[karpenter_kit.ON_DEMAND]) for at, live, _ in curve.samples]
    return [at for (at, n), (_, before) in zip(counts[1:], counts, strict=False) if n == 0 < before]


def test_an_empty_karpenter_node_stays_for_consolidate_after_and_the_validation() -> None:
    gang = [Arrival("gang", 0, 30, 2, 8, ON_DEMAND)]
    # empty at 30: 5 s consolidate_after, 15 s validation, 5 s of polling
    assert gone_at(fleet("karpenter"), gang) == [30 + 25]
    # the cluster autoscaler's model: scale_down_seconds
    assert gone_at(fleet("managed"), gang) == [30 + 5]
    # nodes used again within that time stay, and go as long after their last pod
    again = [*gang, Arrival("again", 50, 20, 2, 8, ON_DEMAND)]
    assert gone_at(fleet("karpenter"), again) == [70 + 25]


def test_the_figures_of_a_curve_by_hand() -> None:
    curve = Curve()
    pool = karpenter_kit.ON_DEMAND
    curve.add(0.0, {pool: 0}, {pool: 0})
    curve.add(2.0, {pool: 2}, {pool: 0})
    curve.add(5.0, {pool: 2}, {pool: 2})
    curve.add(40.0, {pool: 1}, {pool: 1})
    curve.add(60.0, {pool: 0}, {pool: 0})
    gang = [Arrival("gang", 1, 30, 2, 8, ON_DEMAND)]
    figures = pool_figures(curve, pool, gang, ON_DEMAND, end=70.0)
    # 2 nodes from 2 to 40 s, 1 to 60 s; first ready at 5 s (4 s after the arrival); the last
    # node gone at 60 s, 29 s after the pods' end at 31 s
    assert figures == PoolFigures(
        peak=2, node_seconds=96.0, scale_up_seconds=4.0, scale_down_seconds=29.0
    )
    other = Curve()
    other.add(0.0, {pool: 0}, {pool: 0})
    other.add(2.0, {pool: 2}, {pool: 2})
    other.add(40.0, {pool: 0}, {pool: 0})
    # the same count to 40 s and from 60 to 70 s: 50 of 70 s
    assert agreement(curve, other, pool, 70.0) == pytest.approx(50 / 70, abs=0.01)


def test_the_bench_prints_the_model_beside_a_recorded_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real = model_curve(fleet("karpenter"), list(SHORT), POOLS, model_settings(6, 5))
    recorded = tmp_path / "run.json"
    recorded.write_text(json.dumps(real.to_json()))
    assert replay_karpenter.main(["--short", "--real", str(recorded)]) == 0
    out = capsys.readouterr().out
    assert "peak                 model        2   real        2" in out
    assert "same node count      100% of the run" in out
