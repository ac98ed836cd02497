"""The typed contract of `data.fleetplane.config` (docs/contracts.md): written by
`fleet.render` from the configuration model, read by the controller through
`decode_document`, which reports every problem as `path: reason`. Free of pydantic and Pulumi,
so the controller imports it."""

from fleet.contract.document import ConfigDocument, Decoded, decode_document, encode_document
from fleet.contract.fleet_sections import (
    Approval,
    Budget,
    IdleRule,
    Model,
    Platform,
    Pool,
    Team,
    Thermal,
    WorkloadType,
)
from fleet.contract.operations import (
    Controller,
    GpuOperator,
    Health,
    Lifetime,
    MaintenanceWindow,
    Upgrade,
)

__all__ = [
    "Approval",
    "Budget",
    "ConfigDocument",
    "Controller",
    "Decoded",
    "GpuOperator",
    "Health",
    "IdleRule",
    "Lifetime",
    "MaintenanceWindow",
    "Model",
    "Platform",
    "Pool",
    "Team",
    "Thermal",
    "Upgrade",
    "WorkloadType",
    "decode_document",
    "encode_document",
]
