"""The whole fleet: the root of the schema, which merges the built-in workload types under the
stack's, and the derived views the components and the rendering read."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pydantic import Field, model_validator

from fleet import catalog, labels
from fleet.config.admission import ApprovalConfig, ApprovalGrant, BudgetConfig
from fleet.config.base import Name, NamespaceName
from fleet.config.clusters import ClusterConfig, ModelConfig, PoolConfig
from fleet.config.operators import OperatorsMixin
from fleet.config.platform import (
    ControllerConfig,
    GpuOperatorConfig,
    ObservabilityConfig,
    OpaConfig,
    VolcanoConfig,
    with_default_placement,
)
from fleet.config.teams import TeamConfig
from fleet.config.workflows import HealthConfig, LifetimeConfig, UpgradeConfig
from fleet.config.workload_types import (
    BUILTIN_WORKLOAD_TYPES,
    PriorityClassConfig,
    WorkloadTypeConfig,
)


class FleetConfig(OperatorsMixin):
    """The whole fleet: the single source of truth of a stack."""

    clusters: list[ClusterConfig] = Field(min_length=1)
    """Clusters and their pools (required, at least one)."""
    models: dict[str, ModelConfig] = Field(min_length=1)
    """Accelerator models in use, by catalog name, with prices (required)."""
    teams: list[TeamConfig] = Field(default_factory=list)
    """Teams. Default none."""
    workload_types: dict[Name, WorkloadTypeConfig] = Field(default_factory=dict)
    """Workload types; the four built-in ones are always present. Default `BUILTIN_WORKLOAD_TYPES`."""
    approval: ApprovalConfig = Field(default_factory=ApprovalConfig)
    """Default see `ApprovalConfig`."""
    approvals: list[ApprovalGrant] = Field(default_factory=list)
    """Approvals granted, rendered as `data.fleetplane.approvals`. Default none."""
    admin_groups: list[str] = Field(default_factory=lambda: ["fleetplane-admins"])
    """Identity-provider groups of the platform admins: the gate lets them set the keys only
    the platform writes (the controller's labels and annotations, Volcano PodGroups). Default
    fleetplane-admins."""
    registries: list[str] = Field(default_factory=lambda: ["nvcr.io/"])
    """Image prefixes team workloads may pull from. Default nvcr.io/."""
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    """Default see `BudgetConfig`."""
    upgrade: UpgradeConfig = Field(default_factory=UpgradeConfig)
    """Default see `UpgradeConfig`."""
    health: HealthConfig = Field(default_factory=HealthConfig)
    """Default see `HealthConfig`."""
    lifetime: LifetimeConfig = Field(default_factory=LifetimeConfig)
    """Default see `LifetimeConfig`."""
    system_namespace: NamespaceName = "fleetplane-system"
    """Namespace of OPA and the controller. Default fleetplane-system."""
    gpu_operator: GpuOperatorConfig = Field(default_factory=GpuOperatorConfig)
    """Default see `GpuOperatorConfig`."""
    volcano: VolcanoConfig = Field(default_factory=VolcanoConfig)
    """Default see `VolcanoConfig`."""
    opa: OpaConfig = Field(default_factory=OpaConfig)
    """Default see `OpaConfig`."""
    controller: ControllerConfig = Field(default_factory=ControllerConfig)
    """Default see `ControllerConfig`."""
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig)
    """Default see `ObservabilityConfig`."""

    @model_validator(mode="before")
    @classmethod
    def _merge_builtin_workload_types(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        given = data.get("workload_types") or {}
        if not isinstance(given, dict):
            return data
        merged: dict[str, Any] = copy.deepcopy(BUILTIN_WORKLOAD_TYPES)
        for name, override in given.items():
            if isinstance(override, dict) and name in merged:
                merged[name] = _deep_merge(merged[name], override)
            else:
                merged[name] = override
        return {**data, "workload_types": merged}

    @model_validator(mode="after")
    def _resolve_default_placement(self) -> FleetConfig:
        # `volcano.placement`'s default depends on `controller.image` (fleet.config.platform).
        # The model is frozen and this is still its construction, hence object.__setattr__ (as
        # a frozen dataclass's __post_init__ does); the section counts as written, so a dump
        # without unset fields keeps the resolved value.
        object.__setattr__(
            self, "volcano", with_default_placement(self.volcano, self.controller.image)
        )
        self.model_fields_set.add("volcano")
        return self

    # Derived views used by the components and the rendering.

    @property
    def pools(self) -> list[PoolConfig]:
        return [pool for cluster in self.clusters for pool in cluster.pools]

    def cluster_of(self, pool: PoolConfig) -> ClusterConfig:
        return next(c for c in self.clusters if any(p is pool for p in c.pools))

    def team(self, name: str) -> TeamConfig:
        return next(t for t in self.teams if t.name == name)

    def allowed_models(self, team: TeamConfig) -> list[str]:
        return list(team.allowed_models) if team.allowed_models is not None else list(self.models)

    def default_model(self, team: TeamConfig) -> str | None:
        if team.default_model is not None:
            return team.default_model
        allowed = self.allowed_models(team)
        return allowed[0] if allowed else None

    def team_pools(self, team: TeamConfig) -> list[PoolConfig]:
        """Pools whose nodes the team's workloads can land on."""
        allowed = set(self.allowed_models(team))
        return [
            p for p in self.pools if (not p.teams or team.name in p.teams) and p.model in allowed
        ]

    def accelerator_resources(self) -> list[str]:
        """Extended resources of the configured models, GPUs first."""
        found = {catalog.MODELS[m].resource for m in self.models if m in catalog.MODELS}
        return sorted(found, key=lambda r: (r != labels.GPU_RESOURCE, r))

    def driver_manager(self, pool: PoolConfig) -> str | None:
        """gpu-operator or cloud for GPU pools (resolved default), None for TPU pools."""
        if pool.accelerator.is_tpu:
            return None
        if pool.driver_manager is not None:
            return pool.driver_manager
        return "cloud" if self.cluster_of(pool).provider == "aws" else "gpu-operator"

    def driver_version(self, pool: PoolConfig) -> str | None:
        """The driver the controller rolls out; None when it does not manage the pool's driver."""
        if self.driver_manager(pool) != "gpu-operator":
            return None
        return self.gpu_operator.driver_version

    def system_namespaces(self) -> list[str]:
        """The platform's own namespaces: no team may use them and the gate judges nothing
        there (every other namespace, team or not, is judged)."""
        names = [
            "kube-system",
            "kube-public",
            "kube-node-lease",
            self.system_namespace,
            self.gpu_operator.namespace,
            self.volcano.namespace,
            self.observability.namespace,
            *(ns for op in self.enabled_operators() for ns in op.namespaces),
        ]
        return list(dict.fromkeys(names))

    def priority_classes(self) -> list[PriorityClassConfig]:
        return [pc for wt in self.workload_types.values() for pc in wt.priority_classes]


def _deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out
