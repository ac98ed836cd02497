"""The input of the `fleetplane/decisions/preempt` policy for one victim of a preemption."""

from __future__ import annotations

from typing import Any

from controller.config import FleetView
from controller.decide.preempt.model import Candidate, Preemption
from controller.observe.model import family


def opa_input(
    preemption: Preemption, victim: Candidate, fleet: FleetView, usage: dict[str, int], now: float
) -> dict[str, Any]:
    """The preempt decision input (docs/contracts.md). A victim that belongs to a gang is
    judged for the whole gang: `victim.gang` names every pod that leaves with it and the devices
    they hold together, so the one decision that allows the victim allows its mates' eviction."""
    return {
        "preemptor": {
            "pod": preemption.preemptor.manifest(),
            "workload_type": preemption.preemptor.workload_type,
            "priority": preemption.priority,
            "pending_seconds": int(preemption.pending_seconds),
        },
        "victim": {
            "pod": victim.pod.manifest(),
            "workload_type": victim.pod.workload_type,
            "priority": victim.priority,
            "running_seconds": int(victim.running_seconds),
            "seconds_since_checkpoint": int(victim.seconds_since_checkpoint),
            "team_usage": {family(r): n for r, n in usage.items()},
            "gang": {
                "pods": [victim.pod.key, *(mate.key for mate in victim.mates)],
                "devices": victim.families,
            },
        },
        "now": int(now),
    }
