"""Teams: namespaces, people, money and accelerator limits."""

from __future__ import annotations

from pydantic import Field

from fleet.config.base import ConfigModel, Name, NamespaceName, Quantity


class ContainerDefaults(ConfigModel):
    """LimitRange defaults for containers that declare no CPU/memory."""

    cpu_request: Quantity = "250m"
    """Default 250m."""
    memory_request: Quantity = "512Mi"
    """Default 512Mi."""
    cpu_limit: Quantity = "4"
    """Default 4."""
    memory_limit: Quantity = "16Gi"
    """Default 16Gi."""


class TeamConfig(ConfigModel):
    """A team: namespaces, people, money and accelerator limits."""

    name: Name
    """Team name; also the name of its Volcano queue (required)."""
    namespaces: list[NamespaceName] = Field(default_factory=list)
    """Namespaces of the team; empty for one namespace named after the team. Default empty."""
    groups: list[str] = Field(default_factory=list)
    """Identity-provider groups bound to the `edit` role in the namespaces. Default none."""
    monthly_budget_usd: float = Field(ge=0)
    """Spend per calendar month before admission denies new work (required)."""
    allowed_models: list[str] | None = None
    """Models the team may request; None for every configured model. Default None."""
    default_model: str | None = None
    """Model used when a workload names none; None for the first allowed model. Default None."""
    quota: dict[str, int] = Field(default_factory=dict)
    """Most accelerators in use at once, per resource; a missing resource is 0. Default none."""
    guaranteed: dict[str, int] = Field(default_factory=dict)
    """Accelerators never reclaimed from the team (Volcano guarantee), per resource. Default none."""
    budget_exempt_types: list[str] = Field(default_factory=list)
    """Workload types (with `budget_exempt`) that keep running over budget. Default none."""
    queue_weight: int = Field(default=1, ge=1)
    """Volcano queue weight (share of contended capacity). Default 1."""
    reclaimable: bool = True
    """Other queues may reclaim what this queue borrowed beyond its share. Default true."""
    container_defaults: ContainerDefaults = Field(default_factory=ContainerDefaults)
    """LimitRange defaults. Default see `ContainerDefaults`."""

    @property
    def effective_namespaces(self) -> list[str]:
        return list(self.namespaces) or [self.name]
