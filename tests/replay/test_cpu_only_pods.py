"""The time-driven replay replays the trace's CPU-only pods too (issue 35): two pod lists with the
same GPU pods, one with CPU-only pods beside them, give different waits and bills. Before, the
replay read only the GPU pods, and both lists gave the same figures to the dollar.

A fleet of one T4 shape (2 GPUs, 8 cores per node), autoscaled from zero; the real OPA admits
the GPU pods (`opa_server`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from localfleet.servers import OpaServer
from replay.cpu_pods import CpuWork, single_ratio
from replay.engine import Replay
from replay.node_pools import node_shapes
from replay.opa import BatchClient
from replay.results import CPU_ONLY, scenario_figures
from replay.runner import run_scenario
from replay.scenarios import load_scenarios
from replay.settings import Settings
from replay.trace import load_trace
from replay.workloads import generate

HOUR = 3600
T4 = 0.978
HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time"
)
NODES = "sn,cpu_milli,memory_mib,gpu,model\nn-0,8000,65536,2,T4\n"
GPU_PODS = [
    # Two one-GPU pods of 3 cores each, an hour each: one node holds both, alone.
    "g-a,3000,1024,1,1000,,LS,Running,1000,4600,1000",
    "g-b,3000,1024,1,1000,,LS,Running,1000,4600,1000",
]
CPU_PODS = [
    # Arrives first and takes 4 of the node's 8 cores for two hours: then one GPU pod fits
    # beside it and the other needs a second node.
    "c-a,4000,4096,0,0,,LS,Running,0,7200,0",
]
FLEET: dict[str, Any] = {
    "assignment": {
        "training": {"research": 1},
        "inference": {"research": 1},
        "batch": {"research": 1},
        "notebook": {"research": 1},
    },
    "fleet": {
        "clusters": [{"name": "replay", "provider": "local", "pools": []}],
        "models": {"t4": {"price_per_hour_usd": {"on-demand": T4, "spot": 0.29}}},
        "teams": [
            {
                "name": "research",
                "monthly_budget_usd": 100000,
                "quota": {"nvidia.com/gpu": 4},
                "budget_exempt_types": ["inference"],
            }
        ],
        "registries": ["nvcr.io/"],
        "opa": {"deploy": False},
        "controller": {"period_seconds": 300, "opa_url": "http://127.0.0.1:1"},
    },
    "scenarios": [{"name": "autoscaled", "controller": ["spend"], "trace_pools": [{}]}],
}


def replay_list(
    opa_server: OpaServer, directory: Path, pod_lines: list[str], fleet: dict[str, Any]
) -> Replay:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "openb_pod_list_default.csv").write_text("\n".join([HEADER, *pod_lines]) + "\n")
    (directory / "openb_node_list_gpu_node.csv").write_text(NODES)
    trace = load_trace(directory)
    path = directory / "scenarios.yaml"
    path.write_text(yaml.safe_dump(fleet, sort_keys=False))
    scenario_set = load_scenarios(
        path, variables={"peak_gpus": 4, "fleet_gpus": 4}, shapes=node_shapes(trace.nodes)
    )
    workloads = generate(trace.pods, scenario_set.assignment)
    client = BatchClient(opa_server.url)
    try:
        return run_scenario(
            scenario_set.scenarios[0],
            workloads,
            client,
            Settings(horizon=4.0 * HOUR, spot_interruptions_per_node_month=0),
            cpu_pods=trace.cpu_pods,
        )
    finally:
        client.close()
        opa_server.put_data("fleetplane/spend", {})


@pytest.mark.integration
def test_a_list_with_more_cpu_demand_changes_the_waits_and_the_bill(
    opa_server: OpaServer, tmp_path: Path
) -> None:
    gpu_only = scenario_figures(replay_list(opa_server, tmp_path / "a", GPU_PODS, FLEET))
    with_cpu = scenario_figures(replay_list(opa_server, tmp_path / "b", GPU_PODS + CPU_PODS, FLEET))
    # GPU pods alone: one node, asked for at 1000 s, ready at 1300 s; both run 1300-4900 s and
    # the node goes 600 s after it empties, at 5500 s: 4,500 s of 2 T4 GPUs; both waited 300 s.
    assert gpu_only["cost_usd"]["total"] == pytest.approx(4500 / HOUR * 2 * T4, abs=0.01)
    assert gpu_only["queue_wait_seconds"]["all"]["p50"] == 300.0
    assert gpu_only["queue_wait_seconds"][CPU_ONLY]["count"] == 0
    # With the CPU-only pod: it asks for a node at 0 s and runs there 300-7500 s (4 of 8
    # cores). At 1000 s one GPU pod fits beside it (4 + 3 cores) and starts at once; the other
    # asks for a second node (1000-5500 s). The first node stands to 8100 s: 12,600 s of
    # 2 GPUs in all.
    assert with_cpu["queue_wait_seconds"][CPU_ONLY] | {"p50": 0} == {
        "count": 1,
        "p50": 0,
        "p95": 300.0,
        "p99": 300.0,
        "max": 300.0,
        "never_started": 0,
    }
    assert with_cpu["queue_wait_seconds"]["all"]["p50"] == 0.0
    assert with_cpu["queue_wait_seconds"]["all"]["max"] == 300.0
    assert with_cpu["cost_usd"]["total"] == pytest.approx(12600 / HOUR * 2 * T4, abs=0.01)
    assert with_cpu["nodes"]["requested"] == 2
    assert with_cpu["gpu_hours"]["allocated"] == pytest.approx(gpu_only["gpu_hours"]["allocated"])


@pytest.mark.integration
def test_cpu_kept_for_idle_gpus_makes_cpu_only_pods_wait_for_them(
    opa_server: OpaServer, tmp_path: Path
) -> None:
    """With 3 cores kept per idle GPU (`volcano.reserve_cpu_per_idle_gpu`), a CPU-only pod
    goes only where 3 cores per idle GPU stay idle after it."""
    fleet = yaml.safe_load(yaml.safe_dump(FLEET))
    fleet["fleet"]["volcano"] = {"reserve_cpu_per_idle_gpu": 3}
    small = ["c-a,2000,4096,0,0,,LS,Running,0,7200,0"]
    figures = scenario_figures(replay_list(opa_server, tmp_path / "r", GPU_PODS + small, fleet))
    # 2 cores: a new node keeps 6 for its 2 idle GPUs, so it asks for one at 0 s and runs from
    # 300 s; both GPU pods land beside it at 1000 s (2 + 3 + 3 cores): one node in all.
    assert figures["queue_wait_seconds"][CPU_ONLY]["max"] == 300.0
    assert figures["queue_wait_seconds"]["all"]["max"] == 0.0
    assert figures["nodes"]["requested"] == 1
    big = ["c-a,4000,4096,0,0,,LS,Running,0,7200,0"]
    starved = scenario_figures(replay_list(opa_server, tmp_path / "s", GPU_PODS + big, fleet))
    # 4 cores: no node of this shape keeps 6 cores for 2 idle GPUs after it, nor 3 for one
    # (1 core left beside a GPU pod): on a fleet of this one GPU shape it never starts.
    assert starved["queue_wait_seconds"][CPU_ONLY]["count"] == 0
    assert starved["queue_wait_seconds"][CPU_ONLY]["never_started"] == 1


def test_the_reservation_counts_each_idle_gpu() -> None:
    class _Pool:
        name = "p"
        cpu_milli = 8000
        memory_mib = 65536
        gpus_per_node = 2
        price_per_gpu_hour = 1.0
        taints: tuple[dict[str, Any], ...] = (
            {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        )

    pool = _Pool()

    class _Fleet:
        pools = (pool,)

    work = CpuWork(_Fleet(), [], single_ratio(3))  # type: ignore[arg-type]
    assert work.reserve == {"p": 3000}
    assert work.pools == [pool]
