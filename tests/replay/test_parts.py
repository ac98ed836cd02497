"""The replay's pure parts: profiles, the trace reader, the generator and its calibration, the
scenario file."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.node_pools import node_shapes
from replay.runner import heaviest_first, trace_variables
from replay.scenarios import ScenarioError, ScenarioSet, evaluate, load_scenarios
from replay.trace import DEFAULT_TRACE_DIR, TraceError, load_trace, read_pods
from replay.workloads import (
    CALIBRATION_TARGETS,
    Assumptions,
    Profile,
    Workload,
    calibration,
    generate,
)

HEADER = "name,num_gpu,gpu_milli,qos,pod_phase,creation_time,deletion_time,scheduled_time"


def test_a_profile_merges_equal_neighbours_and_integrates() -> None:
    profile = Profile.of([(100, 0), (50, 0), (100, 40), (50, 0), (100, 10)])
    assert profile.ends == (150, 250, 300, 400)
    assert profile.utils == (0, 40, 0, 10)
    assert profile.integral(0, 400) == (100 * 40 + 100 * 10, 200)
    assert profile.integral(200, 350) == (50 * 40 + 50 * 10, 100)
    assert profile.max_between(0, 149) == 0
    assert profile.max_between(100, 300) == 40
    assert profile.next_busy(0) == 150
    assert profile.next_busy(200) == 200
    assert profile.next_busy(260) == 300
    assert Profile.constant(10, 0).next_busy(0) is None


def test_the_trace_reader_keeps_gpu_pods_and_says_what_it_left_out(tmp_path: Path) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(
        "\n".join(
            [
                HEADER,
                "a,1,500,LS,Running,0,100,10",
                "b,0,0,LS,Running,0,100,0",
                "c,8,1000,BE,Pending,50,60,",
                "d,2,1000,BE,Failed,70,70,70",
            ]
        )
        + "\n"
    )
    pods, skipped = read_pods(path)
    assert [(p.name, p.gpus, p.shared, p.run_seconds) for p in pods] == [
        ("a", 1, True, 90),
        ("c", 8, False, 10),
    ]
    assert skipped == {"cpu-only": 1, "no-lifetime": 1}


def test_a_pod_list_without_times_cannot_be_replayed(tmp_path: Path) -> None:
    (tmp_path / "openb_pod_list_default.csv").write_text("name,num_gpu,gpu_milli\na,1,1000\n")
    with pytest.raises(TraceError, match="creation_time, deletion_time"):
        load_trace(tmp_path)


def test_sizes_in_the_scenario_file_are_arithmetic_on_the_trace() -> None:
    assert evaluate("ceil(peak_gpus / 8) * 8", {"peak_gpus": 71}) == 72
    assert evaluate("max(1, floor(peak_gpus / 4))", {"peak_gpus": 3}) == 1
    with pytest.raises(ScenarioError, match="only numbers"):
        evaluate("__import__('os')", {"peak_gpus": 1})
    with pytest.raises(ScenarioError, match="not a whole number"):
        evaluate("peak_gpus / 2", {"peak_gpus": 3})


def default_scenario_set() -> ScenarioSet:
    """The shipped scenarios, sized by the default trace as a run sizes them."""
    trace = load_trace(DEFAULT_TRACE_DIR)
    return load_scenarios(variables=trace_variables(trace), shapes=node_shapes(trace.nodes))


def test_every_default_scenario_is_a_valid_configuration() -> None:
    scenarios = default_scenario_set().scenarios
    assert [s.name for s in scenarios] == ["fixed", "autoscaled", "spot", "reclaim", "governed"]
    fixed, autoscaled, spot, _, governed = scenarios
    # One pool per node shape of the node list (15), with all seven of its GPU models.
    assert len(fixed.fleet.pools) == 15
    assert {p.model for p in fixed.fleet.pools} == {
        "alibaba-g2",
        "alibaba-g3",
        "t4",
        "p100",
        "v100-16gb",
        "v100-32gb",
        "a10",
    }
    assert all(p.min_nodes == p.max_nodes for p in fixed.fleet.pools)
    g2 = next(p for p in autoscaled.fleet.pools if p.model == "alibaba-g2")
    # The G2 shape holds 71 % of the node list's GPUs: 71 % of the 71-GPU peak is 7 nodes.
    assert (g2.min_nodes, g2.max_nodes, g2.accelerators) == (0, 7, 8)
    assert autoscaled.pool_shapes[g2.name].cpu_milli == 96000
    spot_pools = [p for p in spot.fleet.pools if p.capacity_type == "spot"]
    assert len(spot_pools) == 15 and sum(p.max_nodes * p.accelerators for p in spot_pools) < sum(
        p.max_nodes * p.accelerators for p in spot.fleet.pools if p.capacity_type == "on-demand"
    )
    assert fixed.capacity_of("batch") == "on-demand"
    assert spot.capacity_of("training") == "spot"
    assert spot.capacity_of("notebook") == "on-demand"
    assert spot.capacity_of("inference") == "on-demand"
    assert governed.concerns == ("idle", "spend", "preempt")
    assert {t.name: t.quota["nvidia.com/gpu"] for t in governed.fleet.teams} == {
        "research": 40,
        "serving": 24,
        "analytics": 18,
    }


@pytest.fixture(scope="module")
def default_workloads() -> list[Workload]:
    trace = load_trace(DEFAULT_TRACE_DIR)
    shares = default_scenario_set().assignment
    return generate(trace.pods, shares)


def test_the_generator_is_reproducible(default_workloads: list[Workload]) -> None:
    trace = load_trace(DEFAULT_TRACE_DIR)
    shares = default_scenario_set().assignment
    again = generate(trace.pods[:200], shares)
    assert [(w.workload_type, w.team, w.profile) for w in again] == [
        (w.workload_type, w.team, w.profile) for w in default_workloads[:200]
    ]
    other = generate(trace.pods[:200], shares, Assumptions(seed=1))
    assert [w.profile for w in other] != [w.profile for w in again]


def test_the_generated_fleet_matches_the_published_figures(
    default_workloads: list[Workload],
) -> None:
    got = calibration(default_workloads)
    targets = {k: v["target"] for k, v in CALIBRATION_TARGETS.items()}
    assert abs(got["pod_mean_util_percent"] - targets["pod_mean_util_percent"]) < 1.5
    assert abs(got["pod_median_util_percent"] - targets["pod_median_util_percent"]) < 0.5
    assert abs(got["pods_at_zero"] - targets["pods_at_zero"]) < 0.03
    low, high = targets["idle_share_of_reserved_gpu_time"]
    assert low <= got["idle_share_of_reserved_gpu_time"] <= high


def test_workers_take_the_scenarios_that_reclaim_first() -> None:
    """Idle reclamation about doubles a scenario's work, so those go first and the short ones
    fill in at the end (the order the worker pool takes them)."""
    order = heaviest_first(default_scenario_set().scenarios)
    assert sorted(order) == ["autoscaled", "fixed", "governed", "reclaim", "spot"]
    assert set(order[:2]) == {"reclaim", "governed"}
    assert order[0] == "governed"  # idle, spend and preempt: the most concerns
