"""The controller's node and work lifecycles: driver upgrades in maintenance windows, run-time
GPU health, and how long work may live."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, Field

from fleet.config.base import ClockTime, ConfigModel, Day, ImageByDigest, MaxUnavailable, Name


class MaintenanceWindow(ConfigModel):
    """A weekly window (UTC) in which driver upgrades may start."""

    days: list[Day] = Field(min_length=1)
    """Days of the week (required)."""
    start: ClockTime = "00:00"
    """Start, HH:MM UTC. Default 00:00."""
    end: ClockTime = "23:59"
    """End, HH:MM UTC, inclusive. Default 23:59."""


class CloudFreeze(ConfigModel):
    """A period in which the cloud starts no node upgrade (a GKE maintenance exclusion of scope
    NO_MINOR_OR_NODE_UPGRADES: control-plane patches, which drain no node, still go on)."""

    name: Name
    """The exclusion's name, unique among the freezes (required)."""
    start: AwareDatetime
    """Start, RFC 3339 with a zone, e.g. 2026-12-20T00:00:00Z (required)."""
    end: AwareDatetime
    """End, RFC 3339 with a zone; GKE bounds it by the end of support of the cluster's minor
    version (required)."""


class UpgradeConfig(ConfigModel):
    """Driver upgrades rolled by the controller."""

    maintenance_windows: list[MaintenanceWindow] = Field(
        default_factory=lambda: [MaintenanceWindow(days=["sat", "sun"])]
    )
    """When upgrades may start. Default all of Saturday and Sunday."""
    max_parallel: int = Field(default=1, ge=1)
    """Nodes upgraded at once across a pool, before `max_unavailable`. Default 1."""
    drain_timeout_seconds: int = Field(default=1800, gt=0)
    """How long GPU jobs on a cordoned node may run before they are evicted. Default 1800."""
    checkpoint_max_age_seconds: int = Field(default=900, ge=0)
    """A pod whose last checkpoint is at most this old is evicted without waiting. Default 900."""
    validation_timeout_seconds: int = Field(default=1800, gt=0)
    """From the driver restart, how long the new driver, its labels, the validator and the
    node's allocatable GPUs may take before the node is marked failed. Default 1800."""
    driver_selector: str = "app=nvidia-driver-daemonset"
    """Label selector of the GPU Operator's driver pods, in `gpu_operator.namespace`.
    Default app=nvidia-driver-daemonset."""
    validator_image: ImageByDigest | None = None
    """The validator pod's image by digest (`REPOSITORY@sha256:...`): the controller's image plus
    `nvidia-ml-py`, built by `fleetplane image build` as `validator`. Required wherever
    `controller.image` is (the controller's own image cannot load NVML). Default None."""
    validator_runtime_class: str | None = None
    """RuntimeClass of the validator pod (e.g. `nvidia`). Default None: the node's default."""
    max_temperature_c: int | None = Field(default=None, ge=1)
    """Validation fails above this GPU temperature. Default None: the health check's 85 C."""
    xid_wait_seconds: float | None = Field(default=None, ge=0, le=60)
    """How long validation watches for critical Xid events. Default None: the check's 2 s."""
    cloud_freezes: list[CloudFreeze] = Field(default_factory=list, exclude=True)
    """Periods in which the cloud starts no node upgrade of any pool, on top of
    `maintenance_windows` (which GKE gets as its recurring window). For the components only:
    the controller's own rollout keeps to the windows, so this is left out of the data
    document (`exclude`). Default none."""


class HealthConfig(ConfigModel):
    """Run-time GPU health: faults found in DCGM series, remediated node by node
    (controller/remediation). Temperature lines are per model, in `fleet.catalog`."""

    max_unavailable: MaxUnavailable = "10%"
    """Nodes of a pool the health machine may hold out of service at once (quarantined,
    draining, remediating, validating, waiting for replacement, or cordoned hot), an integer or
    "N%" of the pool rounded up, at least 1: a fleet-wide alert storm stops here. Default 10%."""
    signal_window_seconds: int = Field(default=600, ge=60)
    """How far back Xid and error-counter evidence is read each pass. Default 600."""
    stale_after_seconds: int = Field(default=120, ge=15)
    """A GPU whose newest sample is older than this is unknown: never healthy, never acted on.
    Default 120."""
    hot_for_seconds: int = Field(default=300, ge=60)
    """A temperature must hold this long (every sample) to cordon, or to uncordon. Default 300."""
    checkpoint_window_seconds: int = Field(default=1800, ge=0)
    """How long running work on a quarantined node gets to checkpoint before it is evicted.
    Default 1800."""
    checkpoint_max_age_seconds: int = Field(default=900, ge=0)
    """A pod (and its gang) whose last checkpoint is this recent is evicted at once. Default 900."""
    remediation_timeout_seconds: int = Field(default=3600, gt=0)
    """How long a reset or reboot request may stay unanswered before the next remedy is asked
    for. Default 3600."""
    validation_timeout_seconds: int = Field(default=1800, gt=0)
    """How long the validator may take after a remediation. Default 1800."""
    recovery: Literal["act", "annotate"] = "act"
    """Who carries out a GPU reset or a node reboot. `act`: the controller does, on the drained
    node, with a privileged pod from `upgrade.validator_image` (`nvidia-smi --gpu-reset`, or the
    host's reboot), each step asked of `fleetplane/decisions/health`. `annotate`: it only writes
    `fleetplane.dev/remediation-request` for a cloud or DCIM integration to carry out. Default
    `act`: without an integration a request is never answered (controller/remediation/README.md)."""


class LifetimeConfig(ConfigModel):
    """How long accelerator work may live: the controller's `lifetime` concern stops work past
    its workload type's maximum runtime (`default_max_runtime_seconds`), reclaims orphaned and
    failed work that still holds accelerators, and reports gang stragglers."""

    stop_grace_seconds: int = Field(default=1800, ge=0)
    """From the warning that a pod runs past its maximum runtime to the earliest stop. Default
    1800."""
    checkpoint_window_seconds: int = Field(default=3600, gt=0)
    """A workload that checkpoints (`fleetplane.dev/checkpoint-location`, `last-checkpoint` or
    `checkpoint-interval-seconds`) is stopped only after its next checkpoint is due after the
    warning: its declared interval, capped at this (the longest a declared interval may postpone
    a stop), and this when it declares none. Default 3600."""
    checkpoint_slack_seconds: int = Field(default=300, ge=0)
    """Time a due checkpoint gets to complete before the stop. Default 300."""
    orphan_grace_seconds: int = Field(default=300, ge=0)
    """From finding a pod whose owner is gone or whose Job failed, while it still holds
    accelerators, to reclaiming it (a garbage collector or Job controller that is merely slow
    gets this long). Default 300."""
    straggler_window_seconds: int = Field(default=1800, ge=60)
    """A gang member at near-zero utilisation while its peers are busy for this long is a
    straggler: reported, and acted on only for pods labelled
    `fleetplane.dev/straggler-action=restart` (the lifetime policy). Default 1800."""
    straggler_util_percent: float = Field(default=5, ge=0, le=100)
    """At or below this peak utilisation over the window a gang member idles. Default 5."""
    busy_util_percent: float = Field(default=50, ge=0, le=100)
    """Peers whose mean utilisation over the window is above this are busy. Default 50."""
