"""Preemption takes the node's disruption lock (controller/nodeflow/lock.py) for its evictions:
on a node a driver upgrade holds it evicts nobody and records that it wants the node; once the
node is free it evicts, and gives the lock back (with the karpenter.sh/do-not-disrupt the lock
set). The real control plane (kwok GPU node), the real OPA."""

from __future__ import annotations

import time
from typing import Any

import pytest

from controller.nodeflow import lock
from tests.controller.conftest import Harness, bare_pod
from tests.controller.test_preempt import (
    priorities as priorities,
)
from tests.controller.test_preempt import wait_node_to_ourselves, wait_unschedulable

pytestmark = pytest.mark.integration

NODE = "h100-ondemand-7"


def node_annotations(h: Harness) -> dict[str, str]:
    return h.client.get(f"/api/v1/nodes/{NODE}")["metadata"].get("annotations") or {}


def set_node_annotations(h: Harness, annotations: dict[str, Any]) -> None:
    h.client.merge_patch(f"/api/v1/nodes/{NODE}", {"metadata": {"annotations": annotations}})


def test_preemption_waits_for_a_node_an_upgrade_holds_then_locks_and_releases_it(
    harness: Harness, priorities: tuple[str, str]
) -> None:
    h = harness
    low, high = priorities
    wait_node_to_ourselves(h)
    now = time.time() + 300
    for name in ("v-0", "v-1"):
        pod = bare_pod(name, "batch", gpus=4)
        pod["spec"]["nodeName"] = NODE
        pod["spec"]["priorityClassName"] = low
        h.create(pod)
    h.wait_running("fleetplane.dev/workload-type=batch", count=2)
    waiting = bare_pod("big", "training", gpus=4, node=NODE)
    waiting["spec"]["priorityClassName"] = high
    h.create(waiting)
    wait_unschedulable(h, "big")

    # A driver upgrade took the node a moment ago (its hold, as nodeflow.lock writes it).
    held = {lock.HOLDER: "upgrade", lock.HELD_SINCE: str(int(now - 60))}
    set_node_annotations(h, held)
    try:
        run = h.run(now, concerns=("preempt",))
        assert run.summary.errors == 0, run.summary.as_dict()
        assert run.mine("preempt.evict") == []
        assert (
            run.summary.get("actions", concern="preempt", action="hold-node", outcome="refused")
            >= 1
        )
        assert node_annotations(h)[lock.WANTED] == "preemption"
    finally:
        set_node_annotations(h, {lock.HOLDER: None, lock.HELD_SINCE: None})

    run = h.run(now + 30, concerns=("preempt",))
    assert run.summary.errors == 0, run.summary.as_dict()
    assert len(run.mine("preempt.evict")) == 1
    assert run.summary.get("actions", concern="preempt", action="hold-node", outcome="done") == 1
    assert run.summary.get("actions", concern="preempt", action="release-node", outcome="done") == 1
    found = node_annotations(h)
    assert lock.HOLDER not in found and lock.DO_NOT_DISRUPT not in found
    assert lock.WANTED not in found  # its own want is cleared when it takes the node
    set_node_annotations(h, {lock.WANTED: None, lock.WANTED_SINCE: None})
