"""The operations' sections of `data.fleetplane.config`: driver upgrades, GPU health
remediation, workload lifetime, the GPU Operator, and the controller's own settings. Read by
the controller only (docs/contracts.md); the defaults are those of the configuration model."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from fleet.contract.codec import at_least, between, nodes_or_percent, non_negative, positive, rules

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _namespace(value: str | None) -> str | None:
    if value is None or _DNS_LABEL.match(value):
        return None
    return f"must be a namespace name, not {value!r}"


@dataclass(frozen=True, kw_only=True)
class MaintenanceWindow:
    """`upgrade.maintenance_windows[i]`: a weekly window in which driver upgrades may start
    (days `mon`..`sun`, `HH:MM` inclusive, UTC unless `timezone` names a zone; checked where the
    controller parses it, controller/upgrade/limits.py)."""

    days: tuple[str, ...] = field(default=())
    start: str = field(default="00:00")
    end: str = field(default="23:59")
    timezone: str | None = field(default=None, metadata=rules(omit_none=True))


@dataclass(frozen=True, kw_only=True)
class Upgrade:
    """`upgrade`: how the controller rolls GPU driver upgrades (controller/upgrade/)."""

    maintenance_windows: tuple[MaintenanceWindow, ...] | None = field(default=None)
    """When upgrades may start; required by the upgrade (rendered: default Saturday and
    Sunday)."""
    max_parallel: int = field(default=1, metadata=rules(check=at_least(1)))
    """Nodes of a pool in the rollout at once, before `max_unavailable`. Default 1."""
    drain_timeout_seconds: int = field(default=1800, metadata=rules(check=non_negative))
    """How long GPU jobs on a cordoned node may run before eviction. Default 1800."""
    checkpoint_max_age_seconds: int = field(default=900, metadata=rules(check=non_negative))
    """A pod whose last checkpoint is at most this old is evicted at once. Default 900."""
    validation_timeout_seconds: int = field(default=1800, metadata=rules(check=at_least(1)))
    """From the driver restart to a failed node. Default 1800."""
    driver_selector: str = field(default="app=nvidia-driver-daemonset")
    """Label selector of the GPU Operator's driver pods. Default app=nvidia-driver-daemonset."""
    validator_runtime_class: str | None = field(default=None)
    """RuntimeClass of the validator pod; None: the node's default. Default None."""
    max_temperature_c: int | None = field(default=None, metadata=rules(check=at_least(1)))
    """Validation fails above this; None: the health check's 85 C. Default None."""
    xid_wait_seconds: float | None = field(default=None, metadata=rules(check=between(0, 60)))
    """How long validation watches for Xid events; None: the check's 2 s. Default None."""
    # Keys a document may carry (not rendered): left out of the document when None.
    wait_for_jobs_timeout_seconds: int | None = field(
        default=None, metadata=rules(check=non_negative, omit_none=True)
    )
    """Overrides `drain_timeout_seconds`. Default None."""
    driver_namespace: str | None = field(
        default=None, metadata=rules(check=_namespace, omit_none=True)
    )
    """Where the driver pods are. Default None: `gpu_operator.namespace`."""
    validator_namespace: str | None = field(
        default=None, metadata=rules(check=_namespace, omit_none=True)
    )
    """Where validator pods run. Default None: `controller.namespace`."""
    validator_image: str | None = field(default=None, metadata=rules(omit_none=True))
    """The validator pod's image by digest (`upgrade.validator_image` of the fleet configuration:
    the controller's image plus nvidia-ml-py). Default None: `controller.image`, which cannot
    load NVML; a configuration whose CronJob runs must name it."""


@dataclass(frozen=True, kw_only=True)
class Health:
    """`health`: run-time GPU health remediation (controller/remediation/)."""

    max_unavailable: int | str = field(default="10%", metadata=rules(check=nodes_or_percent))
    """Nodes of a pool held out of service at once, an integer or "N%". Default 10%."""
    signal_window_seconds: int = field(default=600, metadata=rules(check=non_negative))
    """How far back fault evidence is read. Default 600."""
    stale_after_seconds: int = field(default=120, metadata=rules(check=non_negative))
    """A GPU whose newest sample is older is unknown. Default 120."""
    hot_for_seconds: int = field(default=300, metadata=rules(check=non_negative))
    """A temperature must hold this long to cordon or uncordon. Default 300."""
    checkpoint_window_seconds: int = field(default=1800, metadata=rules(check=non_negative))
    """How long work on a quarantined node gets to checkpoint. Default 1800."""
    checkpoint_max_age_seconds: int = field(default=900, metadata=rules(check=non_negative))
    """A pod whose last checkpoint is this recent is evicted at once. Default 900."""
    remediation_timeout_seconds: int = field(default=3600, metadata=rules(check=non_negative))
    """How long a remedy may stay unanswered. Default 3600."""
    validation_timeout_seconds: int = field(default=1800, metadata=rules(check=non_negative))
    """How long the validator may take after a remediation. Default 1800."""
    recovery: Literal["act", "annotate"] = field(default="act")
    """Who carries out a reset or reboot: `act` the controller, `annotate` an integration that
    answers `fleetplane.dev/remediation-request`. Default act."""


@dataclass(frozen=True, kw_only=True)
class Lifetime:
    """`lifetime`: how long work past its maximum runtime, orphaned work and stragglers are
    given (the controller's `lifetime` concern)."""

    stop_grace_seconds: int = field(default=1800, metadata=rules(check=non_negative))
    """From the warning to the earliest stop. Default 1800."""
    checkpoint_window_seconds: int = field(default=3600, metadata=rules(check=positive))
    """Longest wait for a workload's next checkpoint before a stop. Default 3600."""
    checkpoint_slack_seconds: int = field(default=300, metadata=rules(check=non_negative))
    """Time a due checkpoint gets to complete. Default 300."""
    orphan_grace_seconds: int = field(default=300, metadata=rules(check=non_negative))
    """From finding orphaned work to reclaiming it. Default 300."""
    straggler_window_seconds: int = field(default=1800, metadata=rules(check=non_negative))
    """Window over which a gang's stragglers are judged. Default 1800."""
    straggler_util_percent: float = field(default=5.0, metadata=rules(check=between(0, 100)))
    """A member below this while its gang is busy is a straggler. Default 5."""
    busy_util_percent: float = field(default=50.0, metadata=rules(check=between(0, 100)))
    """A gang at or above this is busy. Default 50."""


@dataclass(frozen=True, kw_only=True)
class GpuOperator:
    """`gpu_operator`: where the GPU Operator runs."""

    namespace: str | None = field(default=None)
    """Its namespace (rendered: default gpu-operator)."""


@dataclass(frozen=True, kw_only=True)
class Controller:
    """`controller`: the controller's own settings, defaults resolved by the rendering. The
    command line overrides them (controller/config.py `Settings`)."""

    period_seconds: int | None = field(default=None, metadata=rules(check=positive))
    """Seconds between passes; None: the Lease's duration. Rendered: default 300."""
    schedule: str | None = field(default=None)
    """The CronJob schedule of that period."""
    preemption_pending_seconds: int = field(default=600, metadata=rules(check=non_negative))
    """A workload pending this long may preempt. Default 600."""
    scrape_interval_seconds: float = field(default=15, metadata=rules(check=positive))
    """DCGM's scrape interval. Default 15."""
    prometheus_url: str | None = field(default=None)
    """Where the metrics are (required by a pass, or on the command line)."""
    opa_url: str | None = field(default=None)
    """Where the decisions are (required by a pass, or on the command line)."""
    opa_ca_file: str | None = field(default=None)
    """CA bundle of an https OPA; None: the system store."""
    opa_service: str | None = field(default=None)
    """"namespace/name" of the OPA Service whose replicas each get the spend; None: opa_url."""
    opa_token_file: str | None = field(default=None)
    """The controller's bearer token for OPA; None sends none."""
    opa_data_configmap: str | None = field(default=None)
    """"namespace/name" of the ConfigMap of the documents OPA loads at start; None: none."""
    dry_run: bool = field(default=False)
    """Decide and log, change nothing. Default false."""
    lease_name: str | None = field(default=None)
    """The Lease that keeps two runs apart. Default None: fleetplane-controller."""
    namespace: str | None = field(default=None)
    """The system namespace. Default None: fleetplane-system."""
    image: str | None = field(default=None)
    """The controller's image (also the validator's)."""
    pushgateway_url: str | None = field(default=None)
    """Where each pass's metrics are pushed; None pushes nothing."""
    query_timeout_seconds: float | None = field(
        default=None, metadata=rules(check=positive, omit_none=True)
    )
    """Per evidence query (not rendered). Default None: 60."""
