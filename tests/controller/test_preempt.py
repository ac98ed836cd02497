"""Preemption end to end: a high-priority training pod kept waiting on a full kwok GPU node;
the controller picks the victims with least work lost, asks OPA for each, evicts through the
Eviction API (a PodDisruptionBudget that appears after the snapshot answers 429 and another
victim is taken), and the waiting pod then lands on the node."""

from __future__ import annotations

import time
from typing import Any

import pytest

from controller.errors import ConflictError, NotFoundError
from controller.observe.kube import pod_path
from controller.reconcile import Hooks
from tests.controller.conftest import Harness, annotations_of, bare_pod, wait_for

pytestmark = pytest.mark.integration

NODE = "h100-ondemand-7"


def priority_class(name: str, value: int, policy: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "preemptionPolicy": policy,
    }


@pytest.fixture
def priorities(harness: Harness) -> Any:
    """Two PriorityClasses named after the test namespace, deleted afterwards. The high one
    does not let kube-scheduler preempt (`Never`): preemption is the controller's job here."""
    low, high = f"{harness.namespace}-low", f"{harness.namespace}-high"
    harness.create(priority_class(low, 100, "PreemptLowerPriority"))
    harness.create(priority_class(high, 5000, "Never"))
    yield low, high
    for name in (low, high):
        harness.kube.kubectl("delete", "priorityclass", name, "--wait=false", check=False)


def wait_node_to_ourselves(h: Harness) -> None:
    """Until no other test's pod is on NODE: the node is this test's alone."""

    def others() -> list[dict[str, Any]]:
        pods = h.client.list("/api/v1/pods", params={"fieldSelector": f"spec.nodeName={NODE}"})
        return [p for p in pods if p["metadata"]["namespace"] != h.namespace]

    wait_for(lambda: not others(), 60)


def wait_unschedulable(h: Harness, name: str) -> None:
    """Until the scheduler has found no node for the pod (so it may preempt)."""

    def unschedulable() -> bool:
        conditions = h.pod(name)["status"].get("conditions") or []
        return any(
            c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions
        )

    wait_for(unschedulable, 60)


def test_preemption_evicts_least_work_lost_and_respects_a_disruption_budget(
    harness: Harness, priorities: tuple[str, str]
) -> None:
    h = harness
    low, high = priorities
    wait_node_to_ourselves(h)
    # Training's production minimum runtime, not the local stack's fast clock (20 s).
    h.document["workload_types"]["training"]["min_runtime_seconds"] = 600

    now = time.time() + 300
    victims = {
        "v-recent": ("batch", now - 60),  # checkpointed a minute ago: least work lost
        "v-mid": ("batch", now - 120),
        "v-old": ("batch", None),  # never checkpointed: all 300 s at stake
        "v-young": ("training", now - 10),  # inside training's 600 s minimum runtime
    }
    for name, (kind, checkpoint) in victims.items():
        pod = bare_pod(name, kind, gpus=2)
        pod["metadata"]["labels"]["app"] = name
        if checkpoint is not None:
            pod["metadata"]["annotations"] = {
                "fleetplane.dev/last-checkpoint": str(int(checkpoint))
            }
        pod["spec"]["nodeName"] = NODE
        pod["spec"]["priorityClassName"] = low
        h.create(pod)
    h.wait_running("fleetplane.dev/workload-type=batch", count=3)
    h.wait_running("fleetplane.dev/workload-type=training", count=1)

    waiting = bare_pod("big", "training", gpus=4, node=NODE)
    waiting["spec"]["priorityClassName"] = high
    h.create(waiting)

    wait_unschedulable(h, "big")

    def pdb_after_snapshot(_snapshot: Any) -> None:
        h.create(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "keep-recent"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "v-recent"}}},
            }
        )

    run = h.run(now, concerns=("preempt",), hooks=Hooks(after_observe=pdb_after_snapshot))
    assert run.summary.errors == 0, run.summary.as_dict()
    assert [line["victim"] for line in run.mine("preempt.evict.blocked")] == [
        f"{h.namespace}/v-recent"
    ]
    evicted = sorted(line["target"].split("/")[1] for line in run.mine("preempt.evict"))
    assert evicted == ["v-mid", "v-old"]

    remaining = {
        p["metadata"]["name"] for p in h.pods() if not p["metadata"].get("deletionTimestamp")
    }
    assert {"v-recent", "v-young", "big"} <= remaining
    assert "fleetplane.dev/preempted-by" not in annotations_of(h.pod("v-recent"))
    assert "fleetplane.dev/preemption-victims" in annotations_of(h.pod("big"))
    assert "PreemptedForThis" in h.reasons("big")
    assert any(e["reason"] == "Preempted" for e in h.events("v-mid"))

    bound = wait_for(lambda: h.pod("big")["spec"].get("nodeName"), 60)
    assert bound == NODE

    # Once it runs, a further pass has nothing to do.
    run = h.run(now + 60, concerns=("preempt",))
    assert run.mine("preempt.evict") == []


def test_an_eviction_names_the_uid_so_another_pod_of_the_same_name_is_not_evicted(
    harness: Harness,
) -> None:
    h = harness
    h.create(bare_pod("p", "batch", gpus=1))
    uid = h.pod("p")["metadata"]["uid"]
    with pytest.raises(ConflictError):
        h.client.evict(
            h.namespace, "p", uid="00000000-0000-0000-0000-000000000000", grace_seconds=0
        )
    assert not h.pod("p")["metadata"].get("deletionTimestamp")
    h.client.evict(h.namespace, "p", uid=uid, grace_seconds=0)

    def gone() -> bool:
        try:
            return bool(h.pod("p")["metadata"].get("deletionTimestamp"))
        except NotFoundError:
            return True

    wait_for(gone, 30)


def test_a_victim_recreated_under_its_name_after_the_snapshot_is_neither_annotated_nor_evicted(
    harness: Harness, priorities: tuple[str, str]
) -> None:
    h = harness
    low, high = priorities
    wait_node_to_ourselves(h)

    now = time.time() + 300
    victim = bare_pod("v", "batch", gpus=8)
    victim["spec"]["nodeName"] = NODE
    victim["spec"]["priorityClassName"] = low
    h.create(victim)
    h.wait_running("fleetplane.dev/workload-type=batch", count=1)
    waiting = bare_pod("big", "training", gpus=8, node=NODE)
    waiting["spec"]["priorityClassName"] = high
    h.create(waiting)

    wait_unschedulable(h, "big")
    judged = h.pod("v")["metadata"]["uid"]

    def recreate_after_snapshot(_snapshot: Any) -> None:
        path = pod_path(h.namespace, "v")
        h.client.delete(
            path, {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
        )

        def gone() -> bool:
            try:
                h.pod("v")
            except NotFoundError:
                return True
            return False

        wait_for(gone, 30)
        h.create(victim)

    run = h.run(now, concerns=("preempt",), hooks=Hooks(after_observe=recreate_after_snapshot))
    again = h.pod("v")
    assert again["metadata"]["uid"] != judged
    assert "fleetplane.dev/preempted-by" not in annotations_of(again)
    assert not again["metadata"].get("deletionTimestamp")
    assert "Preempted" not in h.reasons("v")
    assert run.summary.errors == 0, run.summary.as_dict()
    assert [line["victim"] for line in run.mine("preempt.evict.gone")] == [f"{h.namespace}/v"]
    assert run.mine("preempt.evict") == []
