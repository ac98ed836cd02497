"""What one state-machine pass did (the driver upgrade's, the health remediation's): its
summary, its plan and what it acted on, or why it did not run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from controller.summary import Summary

PlanT = TypeVar("PlanT")
ActedT = TypeVar("ActedT")


@dataclass(kw_only=True)
class PassOutcome(Generic[PlanT, ActedT]):
    summary: Summary
    acted: ActedT
    plan: PlanT | None = None
    skipped: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.summary.errors
