"""A replay whose every figure is known by hand: one idle notebook reclaimed after its window,
one spot training job interrupted and resumed from its checkpoint, one notebook refused by the
admission gate because its team would go over budget. The real OPA decides (`opa_server`)."""

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
from replay.settings import EPOCH, Settings
from replay.trace import load_trace
from replay.workloads import Profile, Workload
from tests.controller.builders import assert_same

HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
TRACE = [
    # name, gpus, qos, created, deleted, scheduled
    ("nb-idle", 1, "LS", 0, 36000, 0),
    ("tr-spot", 1, "BE", 0, 7200, 0),
    ("nb-busy", 1, "LS", 0, 72000, 0),
    ("nb-late", 1, "LS", 54000, 57600, 54000),
]

FLEET: dict[str, Any] = {
    "assignment": {
        "training": {"research": 1},
        "inference": {"research": 1},
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
                        "capacity_type": "on-demand",
                        "min_nodes": 1,
                        "max_nodes": 1,
                    },
                    {
                        "name": "a100-spot",
                        "model": "a100-40gb",
                        "machine_type": "p4d.24xlarge",
                        "capacity_type": "spot",
                        "min_nodes": 1,
                        "max_nodes": 1,
                    },
                ],
            }
        ],
        "models": {"a100-40gb": {"price_per_hour_usd": {"on-demand": 4.10, "spot": 1.23}}},
        "teams": [
            {"name": "research", "monthly_budget_usd": 100000, "quota": {"nvidia.com/gpu": 16}},
            {"name": "analytics", "monthly_budget_usd": 100, "quota": {"nvidia.com/gpu": 16}},
        ],
        "registries": ["nvcr.io/"],
        "opa": {"deploy": False},
        "controller": {"period_seconds": 300, "opa_url": "http://127.0.0.1:1"},
    },
    "scenarios": [
        {
            "name": "known",
            "title": "Known answer",
            "controller": ["idle", "spend", "preempt"],
            "queueing": "fifo",
            "spot_types": ["training"],
        }
    ],
}


def write_trace(directory: Path) -> None:
    lines = [HEADER]
    for name, gpus, qos, created, deleted, scheduled in TRACE:
        lines.append(
            f"{name},8000,16384,{gpus},1000,,{qos},Running,{created},{deleted},{scheduled}"
        )
    (directory / "openb_pod_list_default.csv").write_text("\n".join(lines) + "\n")


def workloads(directory: Path) -> list[Workload]:
    pods = {p.name: p for p in load_trace(directory).pods}

    def workload(name: str, index: int, kind: str, team: str, util: float) -> Workload:
        pod = pods[name]
        return Workload(
            pod=pod,
            index=index,
            workload_type=kind,
            team=team,
            high_priority=False,
            profile=Profile.constant(pod.run_seconds, util),
            checkpoint_seconds=1800 if kind == "training" else None,
            fb_used_mib=1024.0,
        )

    return [
        workload("nb-idle", 0, "notebook", "research", 0.0),
        workload("tr-spot", 1, "training", "research", 80.0),
        workload("nb-busy", 2, "notebook", "analytics", 50.0),
        workload("nb-late", 3, "notebook", "analytics", 50.0),
    ]


@pytest.fixture(scope="module")
def replay(opa_server: OpaServer, tmp_path_factory: pytest.TempPathFactory) -> Replay:
    directory = tmp_path_factory.mktemp("trace")
    write_trace(directory)
    scenarios = directory / "scenarios.yaml"
    scenarios.write_text(yaml.safe_dump(FLEET, sort_keys=False))
    scenario = load_scenarios(scenarios, variables={"peak_gpus": 4}).scenarios[0]
    client = BatchClient(opa_server.url)
    settings = Settings(
        spot_interruptions_per_node_month=0.0, interruptions=(("a100-spot", 4000.0),)
    )
    try:
        return run_scenario(scenario, workloads(directory), client, settings)
    finally:
        client.close()
        opa_server.put_data("fleetplane/spend", {})


@pytest.mark.integration
def test_the_idle_notebook_is_warned_after_its_window_and_reclaimed_after_its_grace(
    replay: Replay,
) -> None:
    figures = scenario_figures(replay)
    notebook = replay.jobs[0]
    assert notebook.state is State.RECLAIMED
    # Started at 0; window 1800 s: warned at the 1800 s period, reclaimed 900 s later.
    assert notebook.finished_at == 2700
    assert_same(
        {
            "warnings": 1,
            "warnings_cleared": 0,
            "reclaimed": 1,
            "denied_by_policy": 0,
            "owner_came_back": 0,
            # 36000 s of idle life left at 2700 s: 33300 s of one GPU.
            "gpu_hours": 9.25,
        },
        figures["reclaim"],
        "reclaim figures",
    )


@pytest.mark.integration
def test_the_spot_job_is_interrupted_and_resumes_from_its_checkpoint(replay: Replay) -> None:
    figures = scenario_figures(replay)
    training = replay.jobs[1]
    assert training.state is State.DONE
    assert training.interrupted == 1
    # Interrupted at 4000 s with a checkpoint at 3600 s: 400 s lost; the pool's replacement
    # node is ready at 4300 s and the remaining 3600 s of work end at 7900 s.
    assert training.lost_seconds == 400
    assert training.finished_at == 7900
    assert_same(
        {"interruptions": 1, "pods_interrupted": 1, "work_lost_gpu_hours": 0.11},
        figures["spot"],
        "spot figures",
    )


@pytest.mark.integration
def test_the_submission_over_budget_is_denied(replay: Replay) -> None:
    figures = scenario_figures(replay)
    late = replay.jobs[3]
    assert late.state is State.DENIED
    assert late.denied_rules == ("budget",)
    # At 54000 s analytics has spent 15 h x $4.10 = $61.50; a notebook is priced at its 12 h
    # default runtime, $49.20: $110.70 is over the $100 budget.
    assert replay.spend_document["analytics"]["usd"] == pytest.approx(4.10 * 72000 / 3600)
    assert_same(
        {
            "reviews": 5,
            "denied": 1,
            "denied_by_rule": {"budget": 1},
            # The refused notebook would have run 3600 s.
            "denied_gpu_hours": 1.0,
            "warnings_by_rule": {},
            "resubmissions": 1,
            "resubmissions_denied": 0,
        },
        figures["admission"],
        "admission figures",
    )


@pytest.mark.integration
def test_fleet_figures(replay: Replay) -> None:
    figures = scenario_figures(replay)
    assert figures["harmed_non_preemptible"] == {"count": 0, "pods": []}
    assert figures["preemption"]["victims"] == 0
    # 20 h: one on-demand node throughout; spot node 1 until 4000 s, its replacement from
    # 4000 s (billed from the request, taking pods from 4300 s).
    assert_same(
        {
            "billed": 320.0,
            "billed_on_demand": 160.0,
            "billed_spot": 160.0,
            # 8 GPUs x (72000 s + 4000 s + 67700 s).
            "provisioned": 319.33,
            # 2700 s + 30 s grace, 72000 s, 4000 s + 3600 s of one GPU each: 82330 s.
            "allocated": 22.87,
            # nb-busy 72000 s, the training job 4000 s + 3600 s: 79600 s.
            "busy": 22.11,
            # 72000 s at 50 % and 7600 s at 80 %.
            "utilisation_weighted": 11.69,
        },
        figures["gpu_hours"],
        "GPU-hours",
    )
    assert figures["cost_usd"]["on_demand"] == pytest.approx(8 * 4.10 * 20)
    assert figures["cost_usd"]["spot"] == pytest.approx(8 * 1.23 * 20)
    waits = figures["queue_wait_seconds"]
    assert (waits["notebook"]["count"], waits["notebook"]["p99"]) == (2, 0.0)
    assert (waits["training"]["count"], waits["training"]["p99"]) == (1, 0.0)


def test_the_epoch_puts_the_replay_in_january() -> None:
    assert EPOCH == 1767225600.0
