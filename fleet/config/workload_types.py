"""Workload types (`fleetplane.dev/workload-type`): their rules, their PriorityClasses, their
idle reclaim, and the defaults of the four built-in ones."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from fleet.config.base import Capacity, ConfigModel, Name


class IdleConfig(ConfigModel):
    """When an accelerator workload counts as idle, and how long it gets after a warning."""

    util_threshold_percent: float = Field(default=5.0, ge=0, le=100)
    """Idle while every GPU utilisation sample stays below this percentage. Default 5."""
    window_seconds: int = Field(default=3600, gt=0)
    """Length of the observation window. Default 3600."""
    grace_seconds: int = Field(default=1800, ge=0)
    """Time between the idle warning and the earliest reclaim; at most `window_seconds` (a
    warning counts only inside one window). Default 1800."""


class PriorityClassConfig(ConfigModel):
    """A PriorityClass a workload type may use; the first one of a type is its default."""

    name: Name
    """PriorityClass name (required)."""
    value: int = Field(ge=-2_147_483_648, le=1_000_000_000)
    """Priority value; above 1e9 is reserved for system classes (required)."""
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = "Never"
    """Whether kube-scheduler may evict lower-priority pods for pods of this class. Only Never
    validates: the controller is the fleet's one preemptor (checkpoint-aware, asking OPA), and
    a scheduler that evicts on its own would race it. The field stays so that a stack that
    writes PreemptLowerPriority is told why, instead of being silently changed. Default Never."""
    description: str = ""
    """Shown by `kubectl get priorityclass`. Default empty."""


class WorkloadTypeConfig(ConfigModel):
    """Rules for one workload type (`fleetplane.dev/workload-type`).

    Field defaults below are for a type not among the built-in ones; the built-in types
    (`BUILTIN_WORKLOAD_TYPES`) start from their own defaults and the stack overrides field by
    field.
    """

    max_accelerators: int = Field(default=8, ge=1)
    """Most accelerators one workload of this type may request. Default 8."""
    capacity: Capacity = "any"
    """Capacity it may run on: any, spot or on-demand. Default any."""
    priority_classes: list[PriorityClassConfig] = Field(default_factory=list)
    """Allowed PriorityClasses, default first. Default none (required for a new type)."""
    default_max_runtime_seconds: int | None = Field(default=None, gt=0)
    """Runtime limit when the workload declares none; None for no limit. Default None."""
    checkpoint_required_on_spot: bool = False
    """Spot workloads must declare a checkpoint location. Default false."""
    budget_exempt: bool = False
    """Teams may list this type in `budget_exempt_types`. Default false."""
    preemptible: bool = True
    """Default of the `fleetplane.dev/preemptible` label. Default true."""
    min_runtime_seconds: int = Field(default=0, ge=0)
    """Never preempted before running this long. Default 0."""
    idle: IdleConfig | None = None
    """Idle reclaim rule; None never reclaims for idleness. Default None."""
    max_idle_timeout_seconds: int | None = Field(default=None, gt=0)
    """Longest idle timeout a workload may declare; None when not applicable. Default None."""
    pod_security: Literal["baseline", "restricted"] = "baseline"
    """Pod Security Standard the gate holds this type's pods to (baseline for every pod;
    restricted adds non-root, no privilege escalation, a seccomp profile, dropped
    capabilities). Default baseline."""
    allow_required_pod_affinity: bool = False
    """Admit this type's accelerator pods with required pod affinity (`podAffinity.
    requiredDuringScheduling...`: run beside a data cache, a parameter server). The
    controller's preemption does not model where other pods run, so it may evict for such a
    pod on a node its affinity rules out; declare it for types whose pods co-locate by
    design. Required anti-affinity and strict topology spreads stay refused. Default false."""


BUILTIN_WORKLOAD_TYPES: dict[str, dict[str, Any]] = {
    "training": {
        "max_accelerators": 64,
        "capacity": "any",
        "priority_classes": [
            {"name": "fleetplane-training", "value": 1000},
            {"name": "fleetplane-training-high", "value": 5000},
        ],
        "default_max_runtime_seconds": 86400,
        "checkpoint_required_on_spot": True,
        "budget_exempt": False,
        "preemptible": True,
        "min_runtime_seconds": 600,
        "idle": {"util_threshold_percent": 5, "window_seconds": 3600, "grace_seconds": 1800},
        "max_idle_timeout_seconds": None,
    },
    "inference": {
        "max_accelerators": 16,
        "capacity": "on-demand",
        "priority_classes": [{"name": "fleetplane-inference", "value": 10000}],
        "default_max_runtime_seconds": None,
        "checkpoint_required_on_spot": False,
        "budget_exempt": True,
        "preemptible": False,
        "min_runtime_seconds": 0,
        "idle": None,
        "max_idle_timeout_seconds": None,
    },
    "notebook": {
        "max_accelerators": 1,
        "capacity": "any",
        "priority_classes": [{"name": "fleetplane-notebook", "value": 500}],
        "default_max_runtime_seconds": 43200,
        "checkpoint_required_on_spot": False,
        "budget_exempt": False,
        "preemptible": True,
        "min_runtime_seconds": 0,
        "idle": {"util_threshold_percent": 1, "window_seconds": 1800, "grace_seconds": 900},
        "max_idle_timeout_seconds": 14400,
    },
    "batch": {
        "max_accelerators": 32,
        "capacity": "spot",
        "priority_classes": [{"name": "fleetplane-batch", "value": 100}],
        "default_max_runtime_seconds": 21600,
        "checkpoint_required_on_spot": False,
        "budget_exempt": False,
        "preemptible": True,
        "min_runtime_seconds": 0,
        "idle": {"util_threshold_percent": 5, "window_seconds": 3600, "grace_seconds": 1800},
        "max_idle_timeout_seconds": None,
    },
}
"""Defaults of the four built-in workload types; a stack overrides them field by field."""
