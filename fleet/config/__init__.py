"""The fleet configuration: one typed, validated description of the whole fleet.

A stack keeps it under one key (`fleetplane:fleet` in `stacks/Pulumi.<stack>.yaml`). Everything
else is derived from it: the Pulumi components read it, `fleet.render` turns it into the
OPA data document, and the controller reads its own section of that rendering. No number is
written twice.

Every field documents its default. Validation happens in two passes, each collecting every
problem with its path instead of stopping at the first: the structural pass (types, ranges,
unknown keys) by pydantic, then the semantic pass (`check_fleet`) across fields: unknown
accelerator models, quotas beyond what the pools can hold, spot-only pools for production
inference, TPU topologies that do not fit the machine type, duplicate names. `parse_fleet`
raises one `ConfigError` listing `path: reason` lines.

The package, one concern a module: `base` (the strict base model and the shared field types),
the schema's sections (`workload_types`, `clusters`, `teams`, `admission`, `workflows`,
`platform`, `operators`) under its root `schema.FleetConfig`, `errors`, the semantic pass `checks`, and
`load` (stack files and `parse_fleet`). Import from `fleet.config`, which names them all.
"""

from fleet.config.admission import ApprovalConfig, ApprovalGrant, BudgetConfig
from fleet.config.base import (
    DNS_LABEL,
    IMAGE_BY_DIGEST,
    Capacity,
    CapacityType,
    ClockTime,
    Day,
    ImageByDigest,
    MaxUnavailable,
    Name,
    NamespaceName,
    Quantity,
)
from fleet.config.checks import EVICTING_VOLCANO_ACTIONS, RESERVED_LABEL_DOMAINS, check_fleet
from fleet.config.clusters import ClusterConfig, GpuSharingConfig, ModelConfig, PoolConfig, Prices
from fleet.config.errors import ConfigError, Problem
from fleet.config.load import (
    KUBECONFIG_CONFIG_KEY,
    STACK_CONFIG_KEY,
    load_stack_config,
    parse_fleet,
    read_stack_file,
)
from fleet.config.operators import BUILTIN_OPERATORS, OperatorConfig, OperatorKind
from fleet.config.platform import (
    AdmissionFrontConfig,
    ControllerConfig,
    GpuOperatorConfig,
    ObservabilityConfig,
    OpaConfig,
    PushgatewayConfig,
    VolcanoConfig,
)
from fleet.config.schema import FleetConfig
from fleet.config.teams import ContainerDefaults, TeamConfig
from fleet.config.workflows import HealthConfig, LifetimeConfig, MaintenanceWindow, UpgradeConfig
from fleet.config.workload_types import (
    BUILTIN_WORKLOAD_TYPES,
    IdleConfig,
    PriorityClassConfig,
    WorkloadTypeConfig,
)

__all__ = [
    "BUILTIN_OPERATORS",
    "BUILTIN_WORKLOAD_TYPES",
    "DNS_LABEL",
    "EVICTING_VOLCANO_ACTIONS",
    "IMAGE_BY_DIGEST",
    "KUBECONFIG_CONFIG_KEY",
    "RESERVED_LABEL_DOMAINS",
    "STACK_CONFIG_KEY",
    "AdmissionFrontConfig",
    "ApprovalConfig",
    "ApprovalGrant",
    "BudgetConfig",
    "Capacity",
    "CapacityType",
    "ClockTime",
    "ClusterConfig",
    "ConfigError",
    "ContainerDefaults",
    "ControllerConfig",
    "Day",
    "FleetConfig",
    "GpuOperatorConfig",
    "GpuSharingConfig",
    "HealthConfig",
    "IdleConfig",
    "ImageByDigest",
    "LifetimeConfig",
    "MaintenanceWindow",
    "MaxUnavailable",
    "ModelConfig",
    "Name",
    "NamespaceName",
    "ObservabilityConfig",
    "OpaConfig",
    "OperatorConfig",
    "OperatorKind",
    "PoolConfig",
    "Prices",
    "PriorityClassConfig",
    "Problem",
    "PushgatewayConfig",
    "Quantity",
    "TeamConfig",
    "UpgradeConfig",
    "VolcanoConfig",
    "WorkloadTypeConfig",
    "check_fleet",
    "load_stack_config",
    "parse_fleet",
    "read_stack_file",
]
