"""What both node workflows read of the decoded configuration: the validator pod and the GPU
Operator's driver pods (fleet/contract, the `upgrade` section; docs/contracts.md).

Driver upgrades and GPU remediation run the same validator pod and recognise the same driver
pods, so these settings are read once, here, by the base. The keys stay under `upgrade` in the
fleet configuration (where users set them), and so do the messages of their problems
(`upgrade.driver_selector: ...`); `UpgradeSettings` extends `WorkflowSettings` with what only
the rollout reads, and `HealthSettings` holds one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.config import ConfigProblems, FleetView
from controller.nodeflow.selectors import Selector, parse_selector

DEFAULT_DRIVER_NAMESPACE = "gpu-operator"
DEFAULT_DRIVER_SELECTOR = parse_selector("app=nvidia-driver-daemonset")
DEFAULT_VALIDATOR_IMAGE = "registry.fleetplane.internal/fleetplane/controller:0.1.0"

_SHARED_UPGRADE_KEYS = frozenset(
    {
        "validation_timeout_seconds",
        "driver_namespace",
        "driver_selector",
        "validator_namespace",
        "validator_image",
        "validator_runtime_class",
        "max_temperature_c",
        "xid_wait_seconds",
    }
)


def owned_by_workflows(path: str) -> bool:
    """Problems of the keys `workflow_settings` reads (each workflow reports them)."""
    head, _, rest = path.partition(".")
    key = rest.split(".")[0].split("[")[0]
    return (head == "upgrade" and key in _SHARED_UPGRADE_KEYS) or (
        head == "gpu_operator" and key == "namespace"
    )


@dataclass(frozen=True, kw_only=True)
class WorkflowSettings:
    """The validator pod and the driver pods, as both node workflows see them.

    validation_timeout_seconds: the validator pod's deadline (and, for the upgrade, how long the
        new driver, its labels, the validator and the GPUs may take). Default 1800.
    driver_namespace, driver_selector: where the GPU Operator's driver DaemonSet pods are, and
        their label selector (`k=v`, `k!=v`, `k`, `!k`, comma-separated). Default `gpu-operator`
        (or `gpu_operator.namespace` when the document has it) and `app=nvidia-driver-daemonset`.
        DaemonSet pods in `driver_namespace` are the operator's operands (device plugin, GFD,
        DCGM, dcgm-exporter, MIG manager, toolkit, validator): they restart with the driver and
        never block it.
    validator_namespace: where validator pods run. Default the controller's namespace
        (`controller.namespace`, else fleetplane-system).
    validator_image: image with Python, this package and nvidia-ml-py. Default
        `controller.image`, else registry.fleetplane.internal/fleetplane/controller:0.1.0.
    validator_runtime_class: RuntimeClass of the validator pod (e.g. `nvidia`); None leaves the
        node's default runtime. Default None.
    max_temperature_c, xid_wait_seconds: passed to the health check when set; None keeps the
        check's own defaults (85 C, 2 s). Default None.
    """

    validation_timeout_seconds: int = 1800
    driver_namespace: str = DEFAULT_DRIVER_NAMESPACE
    driver_selector: Selector = DEFAULT_DRIVER_SELECTOR
    validator_namespace: str = "fleetplane-system"
    validator_image: str = DEFAULT_VALIDATOR_IMAGE
    validator_runtime_class: str | None = None
    max_temperature_c: int | None = None
    xid_wait_seconds: float | None = None


def workflow_values(fleet: FleetView, problems: list[str]) -> dict[str, Any]:
    """`WorkflowSettings` keyword values from the decoded document; a problem of them is
    appended to `problems` with its path (the decoder's are the caller's to collect)."""
    section = fleet.document.upgrade
    values: dict[str, Any] = {
        "validation_timeout_seconds": section.validation_timeout_seconds,
        "driver_namespace": section.driver_namespace
        or fleet.document.gpu_operator.namespace
        or DEFAULT_DRIVER_NAMESPACE,
        "validator_namespace": section.validator_namespace
        or fleet.controller.namespace
        or "fleetplane-system",
        "validator_image": section.validator_image
        or fleet.controller.image
        or DEFAULT_VALIDATOR_IMAGE,
    }
    if section.max_temperature_c is not None:
        values["max_temperature_c"] = section.max_temperature_c
    if section.xid_wait_seconds is not None:
        values["xid_wait_seconds"] = float(section.xid_wait_seconds)
    if section.validator_runtime_class:
        values["validator_runtime_class"] = section.validator_runtime_class
    try:
        values["driver_selector"] = parse_selector(section.driver_selector)
    except ValueError as error:
        problems.append(f"upgrade.driver_selector: {error}")
    return values


def workflow_settings(fleet: FleetView) -> WorkflowSettings:
    """`WorkflowSettings` from the decoded document; raises `ConfigProblems` listing every
    problem of the keys it reads."""
    problems = fleet.problems_of(owned_by_workflows)
    values = workflow_values(fleet, problems)
    if problems:
        raise ConfigProblems(problems)
    return WorkflowSettings(**values)
