"""The Karpenter scene of `make up`'s scenario, without servers: what it submits for the local
stack's Karpenter pool, and that a scene whose nodes never come fails `up` naming what it
waited for. The scene against the real Karpenter runs in tests/e2e/test_local_stack.py."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from fleet.config import load_stack_config, parse_fleet
from localfleet import scenario_karpenter
from localfleet.controlplane import ClusterError
from localfleet.scenario import QUEUE_ANNOTATION, gang
from localfleet.scenario_karpenter import GANG, play_karpenter_scene
from tests.components.component_testkit import minimal_raw_fleet

ROOT = Path(__file__).resolve().parents[2]


class StuckCluster:
    """A cluster on which Karpenter never brings a node: the gang's pods stay Pending."""

    def __init__(self, data_dir: Path) -> None:
        self.applied: list[dict[str, Any]] = []
        self.data_dir = data_dir  # where Karpenter's log would be (there is none)

    def apply(self, objects: list[dict[str, Any]]) -> None:
        self.applied += objects

    def get_json(self, kind: str, *args: str) -> dict[str, Any]:
        if kind == "pods":
            return {
                "items": [
                    {
                        "metadata": {"name": f"{GANG}-worker-{i}"},
                        "spec": {},
                        "status": {
                            "phase": "Pending",
                            "conditions": [
                                {
                                    "type": "PodScheduled",
                                    "status": "False",
                                    "message": "0/20 nodes are unavailable",
                                }
                            ],
                        },
                    }
                    for i in range(2)
                ]
            }
        return {"items": []}

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(list(args), 0, "", "No resources found")


def research_gang(name: str, members: int, spec: dict[str, Any]) -> dict[str, Any]:
    return gang(name, "ml-research", "research", members, spec, {QUEUE_ANNOTATION: "research"})


def test_the_gang_fills_the_local_pool_and_a_stuck_scene_fails_up_loudly(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fleet = load_stack_config(ROOT / "stacks" / "Pulumi.local.yaml")
    monkeypatch.setattr(scenario_karpenter, "GROW_SECONDS", 0.5)
    monkeypatch.setattr(scenario_karpenter, "POLL_SECONDS", 0.1)
    cluster = StuckCluster(tmp_path)
    with pytest.raises(ClusterError) as caught:
        play_karpenter_scene(
            cluster,  # type: ignore[arg-type]
            fleet,
            gang=research_gang,
            priority_class="fleetplane-training",
            log=lambda message: None,
        )
    message = str(caught.value)
    assert "waited 0s for Karpenter's nodes of pool a10g-ondemand and the gang" in message
    assert "ml-research/a10g-eval running on them" in message
    assert f"{GANG}-worker-0: Pending on - 0/20 nodes are unavailable" in message
    assert "--- karpenter: no log" in message
    # the gang it submitted: one member per node the pool may have, each a whole node of it
    (job,) = cluster.applied
    assert job["kind"] == "Job" and job["spec"]["minAvailable"] == 2
    (task,) = job["spec"]["tasks"]
    assert task["replicas"] == 2
    pod = task["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    assert pod["nodeSelector"] == {
        "nvidia.com/gpu.product": "NVIDIA-A10G",
        "fleetplane.dev/pool": "a10g-ondemand",
    }
    assert task["template"]["metadata"]["annotations"][QUEUE_ANNOTATION] == "research"


def test_no_karpenter_pool_no_scene(tmp_path: Path) -> None:
    cluster = StuckCluster(tmp_path)
    account = play_karpenter_scene(
        cluster,  # type: ignore[arg-type]
        parse_fleet(minimal_raw_fleet()),
        gang=research_gang,
        priority_class="fleetplane-training",
        log=lambda message: None,
    )
    assert account == "" and cluster.applied == []
