"""The one victim comparator, with numbered tie-breakers (see the package doc): least time since
the last checkpoint, then lower priority, then fewer accelerators, then namespace and name."""

from __future__ import annotations

from typing import Any

from controller.decide.preempt.model import Candidate


def victim_order(candidate: Candidate) -> tuple[Any, ...]:
    """The one victim comparator (see the module doc for the numbered tie-breakers)."""
    return (
        candidate.seconds_since_checkpoint,
        candidate.priority,
        candidate.devices,
        candidate.pod.namespace,
        candidate.pod.name,
    )
