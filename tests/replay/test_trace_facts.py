"""The trace's facts move the replay, with answers computed by hand: a fleet built from a node
list of two shapes (one T4 node: 2 GPUs, 8 cores; one V100 16 GB node: 4 GPUs, 32 cores),
pods that name GPU models, ask for CPU, or ask for half a GPU. The real OPA admits them
(`opa_server`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from localfleet.servers import OpaServer
from replay.engine import Replay
from replay.node_pools import node_shapes
from replay.opa import BatchClient
from replay.results import scenario_figures
from replay.runner import run_scenario
from replay.scenarios import load_scenarios
from replay.settings import Settings
from replay.trace import TraceNode, TracePod
from replay.workloads import Profile, Workload

NODES = [
    TraceNode(name="n-t4", gpus=2, model="T4", cpu_milli=8000, memory_mib=65536),
    TraceNode(name="n-v100", gpus=4, model="V100M16", cpu_milli=32000, memory_mib=131072),
]
HOUR = 3600
T4, V100 = 0.978, 3.06

FLEET: dict[str, Any] = {
    "assignment": {
        "training": {"research": 1},
        "inference": {"research": 1},
        "batch": {"research": 1},
        "notebook": {"research": 1},
    },
    "fleet": {
        "clusters": [{"name": "replay", "provider": "local", "pools": []}],
        "models": {
            "t4": {"price_per_hour_usd": {"on-demand": T4, "spot": 0.29}},
            "v100-16gb": {"price_per_hour_usd": {"on-demand": V100, "spot": 0.92}},
        },
        "teams": [
            {
                "name": "research",
                "monthly_budget_usd": 100000,
                "quota": {"nvidia.com/gpu": 6},
                # Inference has no runtime bound, so it is priced as unbounded unless the team
                # takes the type's budget exemption.
                "budget_exempt_types": ["inference"],
            }
        ],
        "registries": ["nvcr.io/"],
        "opa": {"deploy": False},
        "controller": {"period_seconds": 300, "opa_url": "http://127.0.0.1:1"},
    },
    "scenarios": [
        {
            "name": "whole",
            "controller": ["spend"],
            "trace_pools": [{"always_on": True}],
        },
        {
            "name": "shared",
            "controller": ["spend"],
            "trace_pools": [
                {
                    "always_on": True,
                    "gpu_sharing": {"strategy": "time-sharing", "max_shared_clients_per_gpu": 4},
                }
            ],
        },
    ],
}


def pod(
    name: str, *, cpu: int = 1000, milli: int = 1000, spec: tuple[str, ...] = (), created: int = 0
) -> TracePod:
    return TracePod(
        name=name,
        num_gpu=1,
        gpu_milli=milli,
        qos="LS",
        phase="Running",
        created=created,
        deleted=created + HOUR,
        scheduled=created,
        gpu_spec=spec,
        cpu_milli=cpu,
        memory_mib=1024,
    )


PODS = [
    # Names the V100: never on the cheaper, fuller T4 node.
    pod("on-v100", spec=("V100M16",)),
    # Asks 6 of the T4 node's 8 cores; the next T4 pod asks 6 more and waits for this one,
    # though a T4 GPU stays free until `anywhere` takes it at 40 s.
    pod("cpu-first", cpu=6000, spec=("T4",), created=10),
    pod("cpu-waits", cpu=6000, spec=("T4",), created=20),
    pod("anywhere", created=40),
    # Half a GPU each, both on the V100 node.
    pod("half-a", milli=500, spec=("V100M16",), created=30),
    pod("half-b", milli=500, spec=("V100M16",), created=30),
]


def workloads() -> list[Workload]:
    return [
        Workload(
            pod=p,
            index=i,
            workload_type="inference",
            team="research",
            high_priority=False,
            profile=Profile.constant(HOUR, 50.0),
            checkpoint_seconds=None,
            fb_used_mib=1024.0,
        )
        for i, p in enumerate(PODS)
    ]


@pytest.fixture(scope="module")
def replays(opa_server: OpaServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Replay]:
    path: Path = tmp_path_factory.mktemp("facts") / "scenarios.yaml"
    path.write_text(yaml.safe_dump(FLEET, sort_keys=False))
    scenarios = load_scenarios(
        path, variables={"peak_gpus": 2, "fleet_gpus": 6}, shapes=node_shapes(NODES)
    ).scenarios
    out = {}
    for scenario in scenarios:
        client = BatchClient(opa_server.url)
        try:
            out[scenario.name] = run_scenario(
                scenario, workloads(), client, Settings(horizon=3.0 * HOUR)
            )
        finally:
            client.close()
            opa_server.put_data("fleetplane/spend", {})
    return out


def placed(replay: Replay) -> dict[str, tuple[str, float, float]]:
    """Per pod: the model of the node it first ran on, when it started, its wait."""
    out = {}
    for job in replay.jobs:
        assert job.first_start is not None and job.submitted_at is not None, job.name
        out[job.workload.pod.name] = (
            job.first_model,
            job.first_start,
            job.first_start - job.submitted_at,
        )
    return out


@pytest.mark.integration
def test_a_pod_that_names_a_model_never_runs_on_another(replays: dict[str, Replay]) -> None:
    runs = placed(replays["whole"])
    assert runs["on-v100"][0] == "v100-16gb"
    assert runs["anywhere"][0] == "t4"  # the fullest node it fits: 1 free GPU against 3


@pytest.mark.integration
def test_a_pod_waits_for_cpu_while_its_node_has_a_free_gpu(replays: dict[str, Replay]) -> None:
    runs = placed(replays["whole"])
    assert runs["cpu-first"] == ("t4", 10.0, 0.0)
    # From 20 s to 40 s a T4 GPU is free, but only 2 cores: it waits for cpu-first's 6 cores,
    # back at 10 + 3600 s (the GPU `anywhere` took at 40 s is not needed: cpu-first's is).
    assert runs["cpu-waits"] == ("t4", HOUR + 10.0, HOUR - 10.0)


def test_cpu_alone_keeps_a_pod_waiting() -> None:
    """On a node with a free GPU and not enough cores left, the scheduler says no."""
    from replay.objects import MILLI, SimNode

    class _Pool:
        cpu_milli = 8000
        memory_mib = 65536
        sharing = False

    node = SimNode(
        name="n",
        pool=_Pool(),  # type: ignore[arg-type]
        requested_at=0.0,
        ready_at=0.0,
        view=None,  # type: ignore[arg-type]
        gpu_left=[0, MILLI],
        cpu_free=2000,
        memory_free=65536,
    )

    class _Job:
        gpus, milli, cpu_milli, memory_mib = 1, MILLI, 6000, 1024

    assert node.gpus_for(_Job()) is None  # type: ignore[arg-type]
    _Job.cpu_milli = 2000
    assert node.gpus_for(_Job()) == (1,)  # type: ignore[arg-type]


@pytest.mark.integration
def test_two_half_gpu_pods_share_one_gpu(replays: dict[str, Replay]) -> None:
    shared = {j.workload.pod.name: j for j in replays["shared"].jobs}
    whole = {j.workload.pod.name: j for j in replays["whole"].jobs}
    assert shared["half-a"].first_start == shared["half-b"].first_start == 30.0
    assert shared["half-a"].first_slots == shared["half-b"].first_slots
    assert whole["half-a"].first_slots != whole["half-b"].first_slots
    # Allocated GPU-hours: the four whole-GPU pods' hours, plus two halves (1 GPU-h) when
    # shared, two wholes (2 GPU-h) when not.
    a = scenario_figures(replays["shared"])["gpu_hours"]["allocated"]
    b = scenario_figures(replays["whole"])["gpu_hours"]["allocated"]
    assert a == pytest.approx(4 + 1.0, abs=0.01)
    assert b == pytest.approx(4 + 2.0, abs=0.01)


@pytest.mark.integration
def test_the_bill_prices_each_model(replays: dict[str, Replay]) -> None:
    figures = scenario_figures(replays["whole"])
    # Both nodes stand the three hours: 2 T4 and 4 V100 GPUs at their own prices.
    assert figures["cost_usd"]["total"] == pytest.approx(3 * (2 * T4 + 4 * V100), abs=0.01)
