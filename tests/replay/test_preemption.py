"""Preemption with a known answer: an inference pod waits behind a training job on a full
on-demand pool, and after the configured ten minutes the controller evicts the job (OPA
allows it); the job loses the work since its last checkpoint and resumes when the GPUs are
free again. The real OPA decides (`opa_server`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from localfleet.servers import OpaServer
from replay.engine import Replay
from replay.objects import State
from replay.opa import BatchClient
from replay.results import scenario_figures
from replay.runner import run_scenario
from replay.scenarios import load_scenarios
from replay.settings import Settings
from replay.trace import TracePod
from replay.workloads import Profile, Workload
from tests.controller.builders import assert_same

pytestmark = pytest.mark.integration

FLEET: dict[str, Any] = {
    "assignment": {
        "training": {"research": 1},
        "inference": {"serving": 1},
        "batch": {"research": 1},
        "notebook": {"research": 1},
    },
    "fleet": {
        "clusters": [
            {
                "name": "replay",
                "provider": "local",
                "pools": [
                    {
                        "name": "a100-ondemand",
                        "model": "a100-40gb",
                        "machine_type": "p4d.24xlarge",
                        "min_nodes": 1,
                        "max_nodes": 1,
                    }
                ],
            }
        ],
        "models": {"a100-40gb": {"price_per_hour_usd": {"on-demand": 4.10, "spot": 1.23}}},
        "teams": [
            {"name": "research", "monthly_budget_usd": 100000, "quota": {"nvidia.com/gpu": 8}},
            {
                "name": "serving",
                "monthly_budget_usd": 100000,
                "quota": {"nvidia.com/gpu": 8},
                "budget_exempt_types": ["inference"],
            },
        ],
        "workload_types": {"batch": {"capacity": "any"}},
        "registries": ["nvcr.io/"],
        "opa": {"deploy": False},
        "controller": {
            "period_seconds": 300,
            "preemption_pending_seconds": 600,
            "opa_url": "http://127.0.0.1:1",
        },
    },
    "scenarios": [
        {"name": "preempt", "controller": ["spend", "preempt"], "queueing": "fifo"},
    ],
}


def pod(name: str, gpus: int, created: int, seconds: int) -> TracePod:
    return TracePod(
        name=name,
        num_gpu=gpus,
        gpu_milli=1000,
        qos="LS",
        phase="Running",
        created=created,
        deleted=created + seconds,
        scheduled=created,
    )


@pytest.fixture(scope="module")
def replay(opa_server: OpaServer, tmp_path_factory: pytest.TempPathFactory) -> Replay:
    path: Path = tmp_path_factory.mktemp("preempt") / "scenarios.yaml"
    path.write_text(yaml.safe_dump(FLEET, sort_keys=False))
    scenario = load_scenarios(path, variables={"peak_gpus": 9}).scenarios[0]
    training = pod("train-8", 8, 0, 7200)
    inference = pod("serve-1", 1, 3900, 3600)
    workloads = [
        Workload(
            pod=training,
            index=0,
            workload_type="training",
            team="research",
            high_priority=False,
            profile=Profile.constant(7200, 90.0),
            checkpoint_seconds=1800,
            fb_used_mib=30000.0,
        ),
        Workload(
            pod=inference,
            index=1,
            workload_type="inference",
            team="serving",
            high_priority=False,
            profile=Profile.constant(3600, 20.0),
            checkpoint_seconds=None,
            fb_used_mib=10000.0,
        ),
    ]
    client = BatchClient(opa_server.url)
    try:
        return run_scenario(scenario, workloads, client, Settings(horizon=20000.0))
    finally:
        client.close()
        opa_server.put_data("fleetplane/spend", {})


def test_the_waiting_inference_pod_preempts_the_training_job(replay: Replay) -> None:
    figures = scenario_figures(replay)
    # Pending from 3900 s; the 4500 s pass finds it waiting 600 s and evicts the job, whose
    # last checkpoint was at 3600 s: 900 s of 8 GPUs lost.
    assert_same(
        {
            "victims": 1,
            "preemptors_served": 1,
            "victims_denied_by_policy": 0,
            "victims_already_gone": 0,
            "work_lost_gpu_hours": 2.0,
            "victims_by_type": {"training": 1},
        },
        figures["preemption"],
        "preemption figures",
    )
    assert figures["harmed_non_preemptible"]["count"] == 0


def test_the_preemptor_starts_when_the_victim_has_let_go(replay: Replay) -> None:
    serving = replay.jobs[1]
    # The victim holds its GPUs for the 30 s grace period after the 4500 s eviction.
    assert serving.first_start == 4530
    assert serving.finished_at == 4530 + 3600
    waits = scenario_figures(replay)["queue_wait_seconds"]["inference"]
    assert (waits["count"], waits["p50"]) == (1, 630.0)


def test_the_victim_resumes_from_its_checkpoint_once_the_gpus_are_free(replay: Replay) -> None:
    training = replay.jobs[0]
    assert training.state is State.DONE
    assert (training.preempted, training.lost_seconds) == (1, 900)
    # Eight GPUs are free again when the inference pod ends at 8130 s; 3600 s of work remain.
    assert training.finished_at == 8130 + 3600
