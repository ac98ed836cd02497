"""Driver upgrades and Karpenter never hold the same node (controller/nodeflow/lock.py), on the
real control plane with the upgrade lab's pool: Karpenter's disruption is simulated by the
taint Karpenter puts on a node it disrupts (`karpenter.sh/disrupted:NoSchedule`); the upgrade
marks the nodes it holds `karpenter.sh/do-not-disrupt`, which Karpenter honours."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller.nodeflow import lock
from controller.upgrade import states
from tests.controller.upgrade.lab import NEW, SATURDAY, STEP, Lab

pytestmark = pytest.mark.integration

DISRUPTED = {"key": lock.KARPENTER_DISRUPTED, "effect": "NoSchedule"}


def raw_nodes(lab: Lab) -> dict[str, dict[str, Any]]:
    return {name: lab.client.get(f"/api/v1/nodes/{name}") for name in lab.names}


def karpenter_disrupting(node: dict[str, Any]) -> bool:
    return any(t.get("key") == lock.KARPENTER_DISRUPTED for t in node["spec"].get("taints") or ())


def set_karpenter_taint(lab: Lab, name: str, present: bool) -> None:
    node = lab.client.get(f"/api/v1/nodes/{name}")
    taints = [t for t in node["spec"].get("taints") or () if t["key"] != lock.KARPENTER_DISRUPTED]
    if present:
        taints.append(DISRUPTED)
    lab.client.merge_patch(f"/api/v1/nodes/{name}", {"spec": {"taints": taints}})


def test_an_upgrade_and_a_consolidation_never_hold_the_same_node(
    lab_factory: Callable[..., Lab],
) -> None:
    lab = lab_factory(nodes=2, max_unavailable=1)
    first, second = lab.names
    lab.roll_in(NEW)
    set_karpenter_taint(lab, first, True)  # Karpenter is consolidating the first node
    held_seen: set[str] = set()
    notes: set[str] = set()
    now = SATURDAY
    for index in range(60):
        now = SATURDAY + index * STEP
        if index == 20:
            # Karpenter gave the node up (its disruption was abandoned): the upgrade may take it.
            set_karpenter_taint(lab, first, False)
        result = lab.run_pass(now)
        assert result is not None and result.ok
        lab.operator_turn(now)
        for name, node in raw_nodes(lab).items():
            annotations = node["metadata"].get("annotations") or {}
            state = (node["metadata"].get("labels") or {}).get(states.STATE_LABEL)
            holder = annotations.get(lock.HOLDER)
            if karpenter_disrupting(node):
                # Never both: the upgrade neither holds nor started on a node Karpenter disrupts.
                assert holder is None and state not in states.IN_PROGRESS, (index, name)
            if state in states.IN_PROGRESS:
                # Every node in the rollout is held by the upgrade and kept from Karpenter.
                assert holder == "upgrade", (index, name, state)
                assert annotations.get(lock.DO_NOT_DISRUPT) == "true", (index, name)
                held_seen.add(name)
        if index < 20:
            assert lab.observe(now).states[first] in (None, states.UPGRADE_REQUIRED)
            assert result.plan is not None
            notes.update(
                line.note for line in result.plan.pools[lab.pool].lines if line.name == first
            )
        settled = lab.observe(now).states.values()
        if index > 20 and all(state == states.UPGRADE_DONE for state in settled):
            break
    observed = lab.observe(now)
    assert observed.drivers == dict.fromkeys(lab.names, NEW)
    assert held_seen == {first, second}
    # Done: every lock given back, and the do-not-disrupt the lock set went with it.
    for name, node in raw_nodes(lab).items():
        annotations = node["metadata"].get("annotations") or {}
        assert lock.HOLDER not in annotations, name
        assert lock.DO_NOT_DISRUPT not in annotations, name
    # While Karpenter disrupted it, the plan said why the first node waited.
    assert any("Karpenter is disrupting it" in note for note in notes), notes
