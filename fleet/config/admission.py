"""What admission holds work to beyond a team's quota: approvals of large requests and budget
thresholds."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import Field

from fleet.config.base import ConfigModel, Name


class ApprovalConfig(ConfigModel):
    """Large requests need an approval (see `FleetConfig.approvals`)."""

    threshold_accelerators: int = Field(default=32, ge=1)
    """Requests above this many accelerators need `fleetplane.dev/approval-id`. Default 32."""


class ApprovalGrant(ConfigModel):
    """An approval the platform admins granted: a workload of `team` carrying `id` in
    `fleetplane.dev/approval-id` may hold up to `max_accelerators` until `expires_at`. It is
    bound to the first workload that uses it (the controller records that workload's uid)."""

    id: Annotated[str, Field(min_length=1)]
    """Approval id, e.g. APR-2026-001 (required)."""
    team: Name
    """Team the approval is for (required)."""
    max_accelerators: int = Field(ge=1)
    """Most accelerators the approved workload may hold (required)."""
    expires_at: datetime
    """When the approval lapses: an ISO 8601 time (UTC unless it says otherwise) or epoch
    seconds (required)."""

    @property
    def expires_at_epoch(self) -> int:
        moment = self.expires_at
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return int(moment.timestamp())


class BudgetConfig(ConfigModel):
    """Budget thresholds as fractions of a team's monthly budget."""

    warn_ratio: float = Field(default=0.8, gt=0)
    """Admission warns from this fraction on. Default 0.8."""
    deny_ratio: float = Field(default=1.0, gt=0)
    """Admission denies from this fraction on. Default 1.0."""
