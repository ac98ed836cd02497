"""Which workflow holds a node. Two workflows never act on one node at once: each mode asks
here whether another holds the node before it admits it. The modes do not import each other,
so each workflow's state label and the states in which it holds a node are written here; a
test holds them against the modes' states tables."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Claim:
    workflow: str
    label: str
    holds: frozenset[str] | None = None
    """The states in which the workflow holds the node; None: any value of the label does."""

    def held(self, labels: dict[str, str]) -> str | None:
        """The workflow's state when it holds a node with these labels, else None."""
        state = labels.get(self.label)
        if not state:
            return None
        return state if self.holds is None or state in self.holds else None


UPGRADE = Claim(
    workflow="driver upgrade",
    label="fleetplane.dev/upgrade-state",
    holds=frozenset(
        {
            "cordon-required",
            "wait-for-jobs-required",
            "drain-required",
            "driver-restart-required",
            "validation-required",
            "uncordon-required",
            "upgrade-failed",
        }
    ),
)
"""In the rollout (cordoned by it) or failed."""

HEALTH = Claim(workflow="GPU health remediation", label="fleetplane.dev/health-state")
"""No label means in service; every state holds the node."""
