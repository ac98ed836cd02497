"""Health remediation with the real Volcano: a checkpointed Volcano Job gang, spread over a node
whose GPU reports an uncorrectable ECC error and a healthy peer, leaves whole when the node is
drained, and Volcano (its job policy: an evicted pod restarts the job) places it whole again on
nodes other than the quarantined one, while that node goes through every state and back."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from controller.observe.kube import pod_path
from controller.remediation import states
from fleet import labels as keys
from localfleet.controlplane import LocalCluster
from tests.controller.remediation.lab import (
    GPU_TAINT,
    LAB_TAINT_KEY,
    STEP,
    T0,
    HealthLab,
    normal,
    wait_for,
)

pytestmark = pytest.mark.integration

TEAM = "vt-beta"
"""A team namespace and queue of the `volcano` fixture (16 GPUs): Volcano's admissions apply to
it and it is the queue the gang waits in, as a team's training job would."""
CHECKPOINT = T0 - 60
GPUS = 8  # a whole node per pod: the two pods of the gang cannot share a node


def gang_job(name: str, pool: str) -> dict[str, Any]:
    """A Volcano Job of two 8-GPU workers that checkpoint (the annotation the drain reads), with
    minAvailable 2 and Volcano's policy that restarts the whole job when one of its pods is
    evicted: a distributed training job restarts from its checkpoint, all ranks together."""
    template = {
        "metadata": {
            "labels": {"app": name},
            "annotations": {keys.LAST_CHECKPOINT: str(CHECKPOINT)},
        },
        "spec": {
            "nodeSelector": {keys.POOL: pool},
            # The lab pool's own taints, not the quarantine taint: a quarantined node refuses it.
            "tolerations": [
                {"key": GPU_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"},
                {"key": LAB_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
            ],
            "terminationGracePeriodSeconds": 0,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                    "resources": {"limits": {keys.GPU_RESOURCE: str(GPUS)}},
                }
            ],
        },
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": TEAM},
        "spec": {
            "schedulerName": "volcano",
            "queue": TEAM,
            "minAvailable": 2,
            "maxRetry": 3,
            "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
            "tasks": [{"name": "worker", "replicas": 2, "template": template}],
        },
    }


def test_a_volcano_gang_leaves_a_failing_gpu_whole_and_restarts_whole_elsewhere(
    lab_factory: Callable[..., HealthLab], kube: LocalCluster, volcano: Any
) -> None:
    def shape(node: str, gpu: int, at: float) -> dict[str, float]:
        values = normal(node, gpu, at)
        if node.endswith("-0") and gpu == 3 and at >= T0 - 300:
            values["DCGM_FI_DEV_XID_ERRORS"] = 48.0
            values["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"] = 2.0
        return values

    lab = lab_factory(shape, nodes=3)
    bad, peer, spare = lab.names
    name = f"gang-{uuid.uuid4().hex[:6]}"

    def gang() -> list[dict[str, Any]]:
        return [
            p
            for p in lab.client.list(pod_path(TEAM), params={"labelSelector": f"app={name}"})
            if not p["metadata"].get("deletionTimestamp")
        ]

    def running(exclude: set[str]) -> list[dict[str, Any]] | None:
        pods = [p for p in gang() if p["metadata"]["uid"] not in exclude]
        whole = len(pods) == 2 and all(p["status"].get("phase") == "Running" for p in pods)
        return pods if whole else None

    # The spare is held back until the gang runs, so the gang spans the failing node and its peer.
    lab.hold(spare, True)
    kube.apply([gang_job(name, lab.pool)])
    try:
        first = wait_for(lambda: running(set()), timeout=90, interval=0.5)
        assert first, ("the gang did not start", gang())
        assert {p["spec"]["nodeName"] for p in first} == {bad, peer}
        first_uids = {p["metadata"]["uid"] for p in first}
        lab.hold(spare, False)

        seen: list[str | None] = []
        restarted: list[dict[str, Any]] | None = None
        lost = 0.0
        for index in range(40):
            lab.run_pass(T0 + index * STEP)
            left = first_uids - {p["metadata"]["uid"] for p in gang()}
            if left and restarted is None:
                # One pass evicted both pods, the one on the healthy peer with the other.
                assert left == first_uids, "the gang was split"
                evicted = lab.nodes()[bad].detail.evicted
                assert {k.split("/", 1)[1] for k in evicted} == {
                    p["metadata"]["name"] for p in first
                }, evicted
                (at,) = {e["at"] for e in evicted.values()}
                # Checkpointed within the last checkpoint_max_age_seconds: evicted at once, each
                # losing its 8 GPUs' work since the checkpoint.
                lost = at - CHECKPOINT
                assert 0 < lost <= lab.health.checkpoint_max_age_seconds, evicted
                assert all(
                    e["gpus"] == GPUS and e["lost_seconds"] == lost for e in evicted.values()
                ), evicted
                restarted = wait_for(lambda: running(first_uids), timeout=90, interval=0.5)
                assert restarted, ("Volcano did not restart the gang whole", gang())
                out = lab.nodes()[bad]
                assert out.state in states.OUT_OF_SERVICE and out.view.unschedulable, out.state
                assert {p["spec"]["nodeName"] for p in restarted} == {peer, spare}
            lab.operator_turn()
            state = lab.states()[bad]
            if (seen or state is not None) and (not seen or seen[-1] != state):
                seen.append(state)
            if state is None and len(seen) > 1:
                break
        assert seen == [
            states.QUARANTINED,
            states.DRAINING,
            states.REMEDIATING,
            states.VALIDATING,
            None,
        ], seen
        assert restarted is not None, "the gang was never evicted"
        job = kube.get_json("vcjob", name, "-n", TEAM)
        # Volcano restarted the job (its policy), it did not recreate one pod at a time.
        assert job["status"].get("retryCount", 0) >= 1, job["status"]
        assert job["status"]["state"]["phase"] == "Running", job["status"]
        # The first eviction is announced on its pod; the second may find its pod already
        # deleted by Volcano's restart (a pod already gone counts as evicted, unannounced).
        announced = [
            pod["metadata"]["name"]
            for pod in first
            if "GpuHealthEviction"
            in {
                e["reason"]
                for e in lab.client.list(
                    f"/api/v1/namespaces/{TEAM}/events",
                    params={"fieldSelector": f"involvedObject.uid={pod['metadata']['uid']}"},
                )
            }
        ]
        assert announced, "no GpuHealthEviction Event on the gang's pods"
        # The node came back without touching the restarted gang.
        assert {p["metadata"]["uid"] for p in gang()} == {p["metadata"]["uid"] for p in restarted}
        assert lab.remediated == [f"{bad}:gpu-reset"]
        cost = lab.nodes()[bad].detail.history[-1]
        assert cost["fault"] == "uncorrectable-ecc"
        assert cost["gpu_hours_of_work_lost"] == pytest.approx(2 * GPUS * lost / 3600, abs=0.001)
    finally:
        # leave the shared cluster without this gang: later tests judge every namespace's pods
        kube.kubectl("delete", "vcjob", name, "-n", TEAM, "--timeout=60s", check=False)
        kube.kubectl(
            "delete", "pods", "--all", "-n", TEAM, "--force", "--grace-period=0", check=False
        )
        deadline = time.monotonic() + 60
        while kube.get_json("pods", "-n", TEAM)["items"] and time.monotonic() < deadline:
            time.sleep(1)
