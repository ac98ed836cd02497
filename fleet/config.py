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
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    model_validator,
)

from fleet import catalog, labels
from fleet.problems import grace_longer_than_window

STACK_CONFIG_KEY = "fleetplane:fleet"
"""The stack configuration key that holds the fleet."""

KUBECONFIG_CONFIG_KEY = "fleetplane:kubeconfig"
"""The stack configuration key naming the kubeconfig of the `local` stack."""

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

Name = Annotated[str, Field(pattern=DNS_LABEL, max_length=40)]
"""A name used in Kubernetes and cloud resource names: a DNS-1123 label of at most 40 chars."""

NamespaceName = Annotated[str, Field(pattern=DNS_LABEL, max_length=63)]
Capacity = Literal["any", "spot", "on-demand"]
CapacityType = Literal["on-demand", "spot"]
Day = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
ClockTime = Annotated[str, Field(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")]
Quantity = Annotated[str, Field(pattern=r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$")]

IMAGE_BY_DIGEST = re.compile(
    r"^(?P<repository>[a-z0-9][a-z0-9._:/-]*?)(:[\w][\w.-]{0,127})?@sha256:[0-9a-f]{64}$"
)


def _image_by_digest(value: Any) -> str:
    if not isinstance(value, str) or not IMAGE_BY_DIGEST.match(value):
        raise ValueError(
            f"{value!r} does not name an image by digest: write REPOSITORY@sha256:<64 hex> "
            "(a tag can be moved to other contents; `fleetplane image build` prints the digest)"
        )
    return value


ImageByDigest = Annotated[str, PlainValidator(_image_by_digest)]
"""`REPOSITORY[:TAG]@sha256:DIGEST`: what runs is decided by the digest, never by a tag alone."""


def _max_unavailable(value: Any) -> int | str:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    if isinstance(value, str) and re.fullmatch(r"([1-9][0-9]?|100)%", value):
        return value
    raise ValueError('must be a number of nodes (1 or more) or a percentage such as "10%"')


MaxUnavailable = Annotated[int | str, PlainValidator(_max_unavailable)]
"""A count or a percentage of nodes, like Kubernetes' IntOrString."""


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        use_attribute_docstrings=True,
    )


# ---------------------------------------------------------------------------------------------
# Workload types
# ---------------------------------------------------------------------------------------------


class IdleConfig(_Model):
    """When an accelerator workload counts as idle, and how long it gets after a warning."""

    util_threshold_percent: float = Field(default=5.0, ge=0, le=100)
    """Idle while every GPU utilisation sample stays below this percentage. Default 5."""
    window_seconds: int = Field(default=3600, gt=0)
    """Length of the observation window. Default 3600."""
    grace_seconds: int = Field(default=1800, ge=0)
    """Time between the idle warning and the earliest reclaim; at most `window_seconds` (a
    warning counts only inside one window). Default 1800."""


class PriorityClassConfig(_Model):
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


class WorkloadTypeConfig(_Model):
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


# ---------------------------------------------------------------------------------------------
# Models, pools, clusters
# ---------------------------------------------------------------------------------------------


class Prices(_Model):
    """Price of one accelerator for one hour, in USD."""

    on_demand: float = Field(alias="on-demand", ge=0)
    """On-demand price (required)."""
    spot: float = Field(ge=0)
    """Spot price (required)."""


class ModelConfig(_Model):
    """An accelerator model the fleet uses; its name must be in `fleet.catalog.MODELS`."""

    price_per_hour_usd: Prices
    """Per accelerator-hour prices (required)."""


class GpuSharingConfig(_Model):
    """Several containers on one GPU (GKE `gpu_sharing_config`, GPU Operator device plugin)."""

    strategy: Literal["time-sharing", "mps"]
    """time-sharing or mps (required)."""
    max_shared_clients_per_gpu: int = Field(default=4, ge=2, le=48)
    """Containers per GPU; each one is a schedulable `nvidia.com/gpu`. Default 4."""


class PoolConfig(_Model):
    """A node pool: identical nodes of one machine type and capacity type."""

    name: Name
    """Pool name, unique in the fleet; the `fleetplane.dev/pool` label value (required)."""
    model: str
    """Accelerator model, a key of `models` (required)."""
    machine_type: str
    """EC2 instance type or GCE machine type, e.g. p5.48xlarge, a3-highgpu-8g (required)."""
    accelerators_per_node: int | None = Field(default=None, ge=1)
    """GPUs or TPU chips per node; None takes it from the machine-type catalog. Default None."""
    capacity_type: CapacityType = "on-demand"
    """on-demand or spot. Default on-demand."""
    min_nodes: int = Field(default=0, ge=0)
    """Autoscaler minimum. Default 0."""
    max_nodes: int = Field(ge=1)
    """Autoscaler maximum; local clusters create this many fake nodes (required)."""
    teams: list[Name] = Field(default_factory=list)
    """Teams that may use the pool; empty for every team. Default empty."""
    zones: list[str] = Field(default_factory=list)
    """GKE node locations; empty for the cluster's default. Default empty."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Extra node labels (not under fleetplane.dev/, kubernetes.io/, k8s.io/ or
    cloud.google.com/, which the platform and the clouds own). Default none."""
    tpu_topology: str | None = None
    """TPU slice topology, e.g. 2x4; required for TPU models. Default None."""
    mig_profile: str | None = None
    """MIG profile applied to every GPU (e.g. 1g.10gb), where the model supports MIG. Default None."""
    gpu_sharing: GpuSharingConfig | None = None
    """GPU time-sharing or MPS. Default None (whole GPUs)."""
    driver_manager: Literal["gpu-operator", "cloud"] | None = None
    """Who installs the NVIDIA driver. gpu-operator: the GPU Operator installs the pinned
    `gpu_operator.driver_version` and the controller rolls upgrades node by node (GKE driver
    installation disabled; EKS standard AL2023 AMI); GPU sharing and MIG then come from the
    operator's device plugin and MIG manager. cloud: the node image ships the driver (EKS
    AL2023_x86_64_NVIDIA AMI; GKE-managed driver with native gpu_sharing_config and
    gpu_partition_size); the controller does not roll it. None: cloud on aws, gpu-operator
    elsewhere. Default None."""
    max_unavailable: MaxUnavailable = 1
    """Nodes a driver upgrade may take out at once: a count (2) or a percentage ("10%"), as
    in Kubernetes' IntOrString. Default 1."""
    disk_size_gb: int = Field(default=200, ge=50)
    """Boot disk size. Default 200."""

    # Derived facts; meaningful once the fleet has passed `check_fleet`.

    @property
    def accelerator(self) -> catalog.AcceleratorModel:
        return catalog.MODELS[self.model]

    @property
    def resource(self) -> str:
        return self.accelerator.resource

    @property
    def machine(self) -> catalog.MachineType | None:
        return catalog.MACHINE_TYPES.get(self.machine_type)

    @property
    def gke_accelerator(self) -> str:
        """GKE guest accelerator type (also the `cloud.google.com/gke-accelerator` node label):
        the machine type's own when it has one (A3 Mega), else the model's; empty when GKE
        does not offer the model."""
        machine = self.machine
        if machine is not None and machine.gke_accelerator:
            return machine.gke_accelerator
        return self.accelerator.gke_accelerator

    @property
    def accelerators(self) -> int:
        """Physical GPUs or TPU chips per node."""
        if self.accelerators_per_node is not None:
            return self.accelerators_per_node
        machine = self.machine
        return machine.accelerators if machine else 0

    @property
    def mig_instances_per_gpu(self) -> int:
        if self.mig_profile is None:
            return 1
        return self.accelerator.mig_profiles.get(self.mig_profile, 1)

    @property
    def sharing_replicas(self) -> int:
        return self.gpu_sharing.max_shared_clients_per_gpu if self.gpu_sharing else 1

    @property
    def allocatable_per_node(self) -> int:
        """Schedulable units of `resource` per node (MIG instances and shared replicas count)."""
        return self.accelerators * self.mig_instances_per_gpu * self.sharing_replicas

    @property
    def capacity(self) -> int:
        """The most units of `resource` this pool can ever hold."""
        return self.max_nodes * self.allocatable_per_node

    @property
    def hosts_per_slice(self) -> int:
        """Nodes (TPU hosts) in one slice; 1 for GPU pools and single-host slices."""
        chips = catalog.topology_chips(self.tpu_topology or "")
        if not self.accelerator.is_tpu or chips is None or self.accelerators == 0:
            return 1
        return max(1, chips // self.accelerators)


class ClusterConfig(_Model):
    """A Kubernetes cluster and its node pools."""

    name: Name
    """Cluster name in the fleet (required)."""
    provider: Literal["aws", "gcp", "local"]
    """aws (EKS), gcp (GKE) or local (kube-apiserver on loopback with KWOK nodes) (required)."""
    cluster_name: str | None = None
    """Name of the existing EKS/GKE cluster; None for `name`. Default None."""
    region: str = ""
    """AWS region, or GKE location (region or zone). Required for aws and gcp. Default empty."""
    project: str = ""
    """GCP project. Required for gcp. Default empty."""
    node_role_arn: str = ""
    """IAM role of the EKS nodes. Required for aws. Default empty."""
    subnet_ids: list[str] = Field(default_factory=list)
    """Subnets of the EKS node groups. Required for aws. Default empty."""
    node_service_account: str = ""
    """GCE service account of GKE nodes; empty for the project default. Default empty."""
    helm_charts: bool = True
    """Install the GPU Operator and Volcano charts (off for offline/local clusters). Default true."""
    kubeconfig: str | None = None
    """Kubeconfig path of this cluster; None for the stack's `fleetplane:kubeconfig` (local
    clusters: `.fleet/local/kubeconfig`) or the ambient KUBECONFIG. Default None."""
    pools: list[PoolConfig] = Field(default_factory=list)
    """Node pools. Default none."""

    @property
    def remote_name(self) -> str:
        return self.cluster_name or self.name


# ---------------------------------------------------------------------------------------------
# Teams
# ---------------------------------------------------------------------------------------------


class ContainerDefaults(_Model):
    """LimitRange defaults for containers that declare no CPU/memory."""

    cpu_request: Quantity = "250m"
    """Default 250m."""
    memory_request: Quantity = "512Mi"
    """Default 512Mi."""
    cpu_limit: Quantity = "4"
    """Default 4."""
    memory_limit: Quantity = "16Gi"
    """Default 16Gi."""


class TeamConfig(_Model):
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


# ---------------------------------------------------------------------------------------------
# Platform settings
# ---------------------------------------------------------------------------------------------


class ApprovalConfig(_Model):
    """Large requests need an approval (see `FleetConfig.approvals`)."""

    threshold_accelerators: int = Field(default=32, ge=1)
    """Requests above this many accelerators need `fleetplane.dev/approval-id`. Default 32."""


class ApprovalGrant(_Model):
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


class BudgetConfig(_Model):
    """Budget thresholds as fractions of a team's monthly budget."""

    warn_ratio: float = Field(default=0.8, gt=0)
    """Admission warns from this fraction on. Default 0.8."""
    deny_ratio: float = Field(default=1.0, gt=0)
    """Admission denies from this fraction on. Default 1.0."""


class MaintenanceWindow(_Model):
    """A weekly window (UTC) in which driver upgrades may start."""

    days: list[Day] = Field(min_length=1)
    """Days of the week (required)."""
    start: ClockTime = "00:00"
    """Start, HH:MM UTC. Default 00:00."""
    end: ClockTime = "23:59"
    """End, HH:MM UTC, inclusive. Default 23:59."""


class UpgradeConfig(_Model):
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
    validator_runtime_class: str | None = None
    """RuntimeClass of the validator pod (e.g. `nvidia`). Default None: the node's default."""
    max_temperature_c: int | None = Field(default=None, ge=1)
    """Validation fails above this GPU temperature. Default None: the health check's 85 C."""
    xid_wait_seconds: float | None = Field(default=None, ge=0, le=60)
    """How long validation watches for critical Xid events. Default None: the check's 2 s."""


class HealthConfig(_Model):
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


class LifetimeConfig(_Model):
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


class GpuOperatorConfig(_Model):
    """The NVIDIA GPU Operator Helm release."""

    chart_version: str = "v25.3.0"
    """Pinned chart version. Default v25.3.0."""
    repository: str = "https://helm.ngc.nvidia.com/nvidia"
    """Chart repository. Default NVIDIA NGC."""
    namespace: NamespaceName = "gpu-operator"
    """Namespace of the release. Default gpu-operator."""
    driver_version: str = Field(default="570.124.06", pattern=r"^[0-9]+\.[0-9]+(\.[0-9]+)?$")
    """Pinned NVIDIA driver of every gpu-operator pool; the controller rolls a change out node
    by node (the operator's own auto-upgrade is off). Default 570.124.06."""
    mig_strategy: Literal["single", "mixed"] = "single"
    """How MIG devices are advertised; single keeps `nvidia.com/gpu`. Default single."""
    dcgm_scrape_interval_seconds: int = Field(default=15, ge=1, le=300)
    """How often Prometheus scrapes the DCGM exporter (its ServiceMonitor); the controller
    counts the samples it expects in an idle window from it. Default 15."""


class VolcanoConfig(_Model):
    """The Volcano Helm release and scheduler configuration."""

    chart_version: str = "1.15.1"
    """Pinned chart version; the release the local fleet runs (tools/go/volcano). Default 1.15.1."""
    repository: str = "https://volcano-sh.github.io/helm-charts"
    """Chart repository. Default the Volcano chart repository."""
    namespace: NamespaceName = "volcano-system"
    """Namespace of the release. Default volcano-system."""
    actions: list[str] = Field(default_factory=lambda: ["enqueue", "allocate", "backfill"])
    """Scheduler actions, in order. `preempt` and `reclaim` are refused: they evict running
    pods on Volcano's own judgement, and the controller is the fleet's one preemptor. Default
    enqueue, allocate, backfill."""
    reserve_cpu_per_idle_gpu: float | None = Field(default=None, gt=0)
    """Cores a pod without GPUs must leave idle per idle GPU of the node it goes to (Volcano's
    resource-strategy-fit proportional predicate; its scores stay off). Keeps CPU-only pods
    from taking the CPU that free GPUs need: on the Alibaba trace, 12 left 36-49 % fewer GPUs
    unallocated when the cluster is full (docs/replay.md, pack mode), at the price that a
    CPU-only pod waits while a GPU-only node's idle GPUs hold the CPU it needs. Default None
    (off)."""


class OpaConfig(_Model):
    """The OPA admission gate."""

    deploy: bool = True
    """Run OPA in the cluster with a validating webhook; false when OPA runs elsewhere (the
    local stack runs it on loopback). Default true."""
    image: ImageByDigest | None = None
    """OPA's image by digest (`REPOSITORY@sha256:...`; `fleetplane image build` builds it from
    the pinned OPA and prints the digest). Required with `deploy: true`. Default None."""
    name: Name = "fleetplane-opa"
    """Name of the Deployment, Service and webhook. Default fleetplane-opa."""
    replicas: int = Field(default=2, ge=1)
    """OPA replicas. Default 2."""
    port: int = Field(default=8443, ge=1024, le=65535)
    """HTTPS port of OPA. Default 8443."""
    webhook_path: str = "/"
    """Path the webhook posts AdmissionReviews to; `/` is OPA's default decision
    (`data.system.main`). Default /."""
    failure_policy: Literal["Fail", "Ignore"] = "Fail"
    """What the API server does when OPA does not answer. Fail: no namespace but the platform's
    own (`system_namespaces`, outside the webhook's scope, so the cluster itself keeps
    working) admits anything unchecked. Default Fail."""
    webhook_timeout_seconds: int = Field(default=5, ge=1, le=30)
    """Webhook timeout. Default 5."""
    cert_validity_days: int = Field(default=825, ge=1)
    """Validity of the generated serving certificate. Default 825."""
    anonymous_webhook: bool = True
    """Whether requests without a bearer token may ask for admission decisions (and nothing
    else: policies/system/authz.rego). The API server of a managed control plane (EKS, GKE)
    calls webhooks without credentials, so true there; false where the API server presents a
    token (a self-managed control plane's AdmissionConfiguration). Default true."""
    external_url: str | None = Field(default=None, pattern=r"^https://[^/:]+:[0-9]+/?$")
    """With `deploy: false`, the HTTPS base URL (`https://HOST:PORT`) of an OPA that serves
    outside the cluster but where the API server reaches it. The gate then declares its
    policies, data, serving certificate (for HOST) and the webhook calling this URL, but no
    Deployment or Service; whatever runs that OPA loads it from those objects (the local
    stack: `fleetplane`, on loopback). None with `deploy: false`: no admission
    gate at all. Default None."""

    @property
    def external_host(self) -> str | None:
        """HOST of `external_url`."""
        if self.external_url is None:
            return None
        return self.external_url.removeprefix("https://").split(":", 1)[0]

    @property
    def external_port(self) -> int | None:
        """PORT of `external_url`."""
        if self.external_url is None:
            return None
        return int(self.external_url.rstrip("/").rsplit(":", 1)[1])

    @property
    def gate(self) -> bool:
        """Whether the admission gate (webhook, policies, data) is declared at all."""
        return self.deploy or self.external_url is not None


class ControllerConfig(_Model):
    """The runtime controller and its CronJob."""

    deploy: bool = True
    """Declare the CronJob (with its RBAC). Default true."""
    suspend: bool = False
    """Declare the CronJob suspended, so nothing in the cluster runs it (the local stack runs
    the controller on the host; its ServiceAccount and RBAC still exist). Default false."""
    image: ImageByDigest | None = None
    """The controller's image by digest (`REPOSITORY@sha256:...`, as `fleetplane image build`
    prints it). Required unless the CronJob is suspended or not declared. Default None."""
    period_seconds: int = Field(default=300, ge=60, le=3600)
    """Time between reconciles; a whole number of minutes dividing an hour. Default 300."""
    preemption_pending_seconds: int = Field(default=600, ge=0)
    """A higher-priority workload pending this long may preempt. Default 600."""
    prometheus_url: str = "http://prometheus-operated.monitoring.svc:9090"
    """Prometheus with the DCGM series. Default the in-cluster prometheus-operated service."""
    opa_url: str | None = None
    """OPA base URL; None for the in-cluster OPA Service (https). Default None."""
    opa_ca_file: str | None = None
    """CA bundle to verify OPA; None for the mounted CA of the in-cluster OPA. Default None."""
    opa_token_file: str | None = None
    """File holding the controller's bearer token for OPA; None for the token the CronJob
    mounts from the gate's Secret. Default None."""
    dry_run: bool = False
    """Decide and log, but do not act. Default false."""
    lease_name: Name = "fleetplane-controller"
    """Lease that keeps two reconciles from overlapping. Default fleetplane-controller."""


class PushgatewayConfig(_Model):
    """Where each controller pass pushes its metrics (Prometheus Pushgateway)."""

    deploy: bool = True
    """Run a Pushgateway in the system namespace (Deployment, Service, ServiceMonitor); false
    when one runs elsewhere (the local stack runs it on loopback). Default true."""
    image: str = "quay.io/prometheus/pushgateway:v1.5.1"
    """Pinned Pushgateway image. Default quay.io/prometheus/pushgateway:v1.5.1."""
    url: str | None = None
    """Base URL the controller pushes to; None for the in-cluster Service. Default None."""


class ObservabilityConfig(_Model):
    """Controller metrics, the alert and recording rules, the dashboards and the chargeback
    report. Thresholds here are the alerts' (observability/rules.yaml reads them)."""

    pushgateway: PushgatewayConfig = Field(default_factory=PushgatewayConfig)
    """Default see `PushgatewayConfig`."""
    prometheus_operator: bool = True
    """Declare the PrometheusRule, the ServiceMonitor of the Pushgateway and the dashboards'
    ConfigMaps (kube-prometheus-stack's CRDs and Grafana sidecar must be installed); false for
    a cluster without them (the local stack loads the same rules into its own Prometheus).
    Default true."""
    namespace: NamespaceName = "monitoring"
    """Namespace of kube-prometheus-stack, where the dashboards' ConfigMaps go. Default
    monitoring."""
    rule_labels: dict[str, str] = Field(
        default_factory=lambda: {"release": "kube-prometheus-stack"}
    )
    """Labels of the PrometheusRule and ServiceMonitor, matching the Prometheus' rule and
    monitor selectors. Default release=kube-prometheus-stack."""
    idle_gpus_alert: int = Field(default=8, ge=1)
    """A team with at least this many GPUs idle (judged by the controller) for
    `idle_alert_for_seconds` fires FleetplaneTeamGpusIdle. Default 8."""
    idle_alert_for_seconds: int = Field(default=1800, ge=0)
    """How long the idle GPUs must stay above the line. Default 1800."""
    hot_gpu_celsius: float = Field(default=85, gt=0)
    """GPU temperature that fires FleetplaneGpuHot (the health check's line too). Default 85."""
    queue_wait_target_seconds: float = Field(default=900, gt=0)
    """Target of a team's p95 wait for accelerators (pending to running); above it for an hour
    fires FleetplaneQueueWaitHigh. Default 900."""
    inference_availability_target: float = Field(default=0.999, gt=0, le=1)
    """Share of the time production inference replicas should be running, not pending; the
    report compares against it. Default 0.999."""
    controller_stale_seconds: int = Field(default=1800, ge=60)
    """No successful controller pass for this long fires FleetplaneControllerNotRunning.
    Default 1800."""
    carbon_intensity_g_per_kwh: dict[str, float] = Field(default_factory=dict)
    """Grid carbon intensity (gCO2eq/kWh) per cluster region, over the catalog's defaults
    (`fleet.catalog.CARBON_INTENSITY_G_PER_KWH`, with their source). Default none."""

    def carbon_intensity(self, region: str) -> tuple[float, str]:
        """gCO2eq/kWh of a region, and where the figure comes from."""
        if region in self.carbon_intensity_g_per_kwh:
            return self.carbon_intensity_g_per_kwh[region], "stack configuration"
        if region in catalog.CARBON_INTENSITY_G_PER_KWH:
            return catalog.CARBON_INTENSITY_G_PER_KWH[region], catalog.CARBON_INTENSITY_SOURCE
        return (
            catalog.WORLD_CARBON_INTENSITY_G_PER_KWH,
            "world average 2023 (Ember, Global Electricity Review 2024): no figure for "
            f"region {region or '(none)'!r}",
        )


class FleetConfig(_Model):
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


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One configuration problem: where (`path`) and what is wrong (`reason`)."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class ConfigError(ValueError):
    """The configuration is invalid; `problems` lists every problem found."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(
            f"invalid fleet configuration ({len(self.problems)} problem"
            f"{'' if len(self.problems) == 1 else 's'}):\n{lines}"
        )


def _format_loc(loc: Iterable[int | str], raw: Any) -> str:
    """`clusters[local].pools[h100-spot].max_nodes` from a pydantic location and the raw data."""
    path = ""
    node = raw
    for part in loc:
        if isinstance(part, int):
            item = node[part] if isinstance(node, list) and part < len(node) else None
            name = item.get("name") if isinstance(item, dict) else None
            path += f"[{name}]" if isinstance(name, str) and name else f"[{part}]"
            node = item
        else:
            # pydantic's own segments (union members, validator names) are not keys of the data
            if not isinstance(node, dict) or (part not in node and "[" in part):
                continue
            segment = f"[{part}]" if re.search(r"[./]", part) else part
            path += segment if not path or segment.startswith("[") else f".{segment}"
            node = node.get(part) if isinstance(node, dict) else None
    return path or "<root>"


# ---------------------------------------------------------------------------------------------
# Semantic checks
# ---------------------------------------------------------------------------------------------


def check_fleet(config: FleetConfig) -> list[Problem]:
    """Every cross-field problem of a structurally valid configuration, in document order."""
    problems: list[Problem] = []

    def add(path: str, reason: str) -> None:
        problems.append(Problem(path=path, reason=reason))

    _check_duplicates(config, add)
    _check_one_preemptor(config, add)
    _check_models(config, add)
    _check_clusters(config, add)
    _check_workload_types(config, add)
    _check_teams(config, add)
    _check_approvals(config, add)
    _check_settings(config, add)
    return problems


RESERVED_LABEL_DOMAINS = ("fleetplane.dev", "kubernetes.io", "k8s.io", "cloud.google.com")


def _duplicates(names: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    dups: list[str] = []
    for name in names:
        if name in seen and name not in dups:
            dups.append(name)
        seen.add(name)
    return dups


def _check_duplicates(config: FleetConfig, add: Any) -> None:
    for name in _duplicates(c.name for c in config.clusters):
        add(f"clusters[{name}]", f"duplicate cluster name {name!r}")
    for name in _duplicates(p.name for p in config.pools):
        add(f"pools[{name}]", f"duplicate pool name {name!r} (pool names are unique in the fleet)")
    for name in _duplicates(t.name for t in config.teams):
        add(f"teams[{name}]", f"duplicate team name {name!r}")
    owners: dict[str, str] = {}
    for team in config.teams:
        for ns in team.effective_namespaces:
            if ns in owners:
                add(
                    f"teams[{team.name}].namespaces",
                    f"namespace {ns!r} already belongs to team {owners[ns]!r}",
                )
            else:
                owners[ns] = team.name
    reserved = {"default", *config.system_namespaces()}
    for team in config.teams:
        for ns in team.effective_namespaces:
            if ns in reserved:
                add(
                    f"teams[{team.name}].namespaces",
                    f"namespace {ns!r} is reserved for the platform",
                )
        if team.name in {"default", "root"}:
            add(f"teams[{team.name}].name", f"{team.name!r} is a reserved Volcano queue name")
    for name in _duplicates(pc.name for pc in config.priority_classes()):
        add("workload_types", f"priority class {name!r} is declared by more than one workload type")


EVICTING_VOLCANO_ACTIONS = ("preempt", "reclaim")
"""Volcano actions that evict running pods on the scheduler's own judgement."""


def _check_one_preemptor(config: FleetConfig, add: Any) -> None:
    """Exactly one component decides who loses accelerators: the controller, which checks
    checkpoints and asks OPA. kube-scheduler (PreemptLowerPriority) and Volcano (preempt,
    reclaim) would evict before it, blind to both."""
    for name, workload_type in config.workload_types.items():
        for pc in workload_type.priority_classes:
            if pc.preemption_policy != "Never":
                add(
                    f"workload_types.{name}.priority_classes[{pc.name}].preemption_policy",
                    "must be Never: the controller is the one preemptor (kube-scheduler would "
                    "evict before its checkpoint-aware, OPA-gated choice)",
                )
    for action in config.volcano.actions:
        if action in EVICTING_VOLCANO_ACTIONS:
            add(
                "volcano.actions",
                f"{action!r} is refused: Volcano would evict on its own, and the controller is "
                "the one preemptor (use enqueue, allocate, backfill)",
            )


def _check_models(config: FleetConfig, add: Any) -> None:
    known = ", ".join(sorted(catalog.MODELS))
    for name in config.models:
        if name not in catalog.MODELS:
            add(f"models[{name}]", f"unknown accelerator model {name!r} (known: {known})")


def _check_clusters(config: FleetConfig, add: Any) -> None:
    team_names = {t.name for t in config.teams}
    for cluster in config.clusters:
        at = f"clusters[{cluster.name}]"
        if cluster.provider == "aws":
            for field, value in (
                ("region", cluster.region),
                ("node_role_arn", cluster.node_role_arn),
                ("subnet_ids", cluster.subnet_ids),
            ):
                if not value:
                    add(f"{at}.{field}", "required for provider aws")
        if cluster.provider == "gcp":
            for field, value in (("region", cluster.region), ("project", cluster.project)):
                if not value:
                    add(f"{at}.{field}", "required for provider gcp")
        for pool in cluster.pools:
            _check_pool(config, cluster, pool, f"{at}.pools[{pool.name}]", team_names, add)


def _check_pool(
    config: FleetConfig,
    cluster: ClusterConfig,
    pool: PoolConfig,
    at: str,
    team_names: set[str],
    add: Any,
) -> None:
    model = catalog.MODELS.get(pool.model)
    if model is None:
        known = ", ".join(sorted(catalog.MODELS))
        add(f"{at}.model", f"unknown accelerator model {pool.model!r} (known: {known})")
    elif pool.model not in config.models:
        add(f"{at}.model", f"model {pool.model!r} has no entry in models (prices)")

    machine = catalog.MACHINE_TYPES.get(pool.machine_type)
    if machine is None:
        if pool.accelerators_per_node is None:
            add(
                f"{at}.machine_type",
                f"unknown machine type {pool.machine_type!r}: set accelerators_per_node",
            )
    else:
        if cluster.provider != "local" and machine.cloud != cluster.provider:
            add(
                f"{at}.machine_type",
                f"{pool.machine_type!r} is a machine type of {machine.cloud}, "
                f"but cluster {cluster.name!r} is on {cluster.provider}",
            )
        if model is not None and machine.model != pool.model:
            add(
                f"{at}.machine_type",
                f"{pool.machine_type!r} carries {machine.model}, not {pool.model}",
            )
        if pool.accelerators_per_node not in (None, machine.accelerators):
            add(
                f"{at}.accelerators_per_node",
                f"{pool.machine_type!r} has {machine.accelerators} accelerators per node, "
                f"not {pool.accelerators_per_node}",
            )

    if pool.min_nodes > pool.max_nodes:
        add(f"{at}.min_nodes", f"min_nodes {pool.min_nodes} is above max_nodes {pool.max_nodes}")
    for team in pool.teams:
        if team not in team_names:
            add(f"{at}.teams", f"unknown team {team!r}")
    for key in pool.labels:
        domain = key.split("/")[0] if "/" in key else ""
        if domain in RESERVED_LABEL_DOMAINS or domain.endswith(
            tuple(f".{d}" for d in RESERVED_LABEL_DOMAINS)
        ):
            add(f"{at}.labels[{key}]", f"{domain} labels are set by the platform or the cloud")

    if model is None:
        return
    if model.is_tpu:
        if cluster.provider == "aws":
            add(f"{at}.model", f"{pool.model} is a TPU: TPU pools need a gcp or local cluster")
        _check_tpu_pool(pool, model, at, add)
        if pool.mig_profile is not None:
            add(f"{at}.mig_profile", f"{pool.model} is a TPU: MIG does not apply")
        if pool.gpu_sharing is not None:
            add(f"{at}.gpu_sharing", f"{pool.model} is a TPU: GPU sharing does not apply")
    else:
        if pool.tpu_topology is not None:
            add(f"{at}.tpu_topology", f"{pool.model} is a GPU: a TPU topology does not apply")
        if pool.mig_profile is not None and pool.mig_profile not in model.mig_profiles:
            supported = ", ".join(model.mig_profiles) or "none: the model has no MIG"
            add(
                f"{at}.mig_profile",
                f"{pool.model} does not support MIG profile {pool.mig_profile!r} (supported: {supported})",
            )
        if cluster.provider == "gcp" and not pool.gke_accelerator:
            add(f"{at}.model", f"{pool.model} is not offered on GKE")


def _check_tpu_pool(pool: PoolConfig, model: catalog.AcceleratorModel, at: str, add: Any) -> None:
    """GKE's rules for a TPU slice node pool: a topology the model offers, on a machine type
    that carries it, in whole hosts; a multi-host pool holds exactly one slice, which GKE
    creates, repairs and scales as one unit (nodes cannot be added to it: more slices take
    more pools), so its node count is the slice's hosts, or 0 when scaled down."""
    topology = pool.tpu_topology
    if topology is None:
        add(f"{at}.tpu_topology", f"required for TPU model {pool.model}")
        return
    chips = catalog.topology_chips(topology)
    dims = topology.split("x")
    if chips is None or len(dims) != model.tpu_topology_dims:
        shape = "x".join(["N"] * model.tpu_topology_dims)
        add(
            f"{at}.tpu_topology",
            f"{topology!r} is not a {pool.model} topology (expected {shape})",
        )
        return
    shapes = catalog.TPU_SLICE_SHAPES.get(pool.model)
    if shapes is not None:
        if shapes.topologies and topology not in shapes.topologies:
            offered = ", ".join(shapes.topologies)
            add(
                f"{at}.tpu_topology",
                f"GKE offers no {topology} slice of {pool.model}; use one of {offered}",
            )
            return
        sizes = [int(d) for d in dims]
        if shapes.dims_all_at_most_4_or_all_multiples_of_4 and not (
            all(d <= 4 for d in sizes) or all(d % 4 == 0 for d in sizes)
        ):
            add(
                f"{at}.tpu_topology",
                f"{topology} is not a {pool.model} topology: its dimensions must be all at "
                "most 4 or all multiples of 4 (e.g. 2x2x4, 4x4x8)",
            )
            return
        carriers = shapes.machine_types_for(topology)
        if carriers and pool.machine_type not in carriers:
            add(
                f"{at}.machine_type",
                f"a {topology} slice of {pool.model} runs on {' or '.join(carriers)}, "
                f"not {pool.machine_type}: change the machine type or the topology",
            )
            return
    per_host = pool.accelerators
    if per_host <= 0:
        return
    if chips % per_host != 0:
        add(
            f"{at}.tpu_topology",
            f"topology {topology} has {chips} chips, not a multiple of the "
            f"{per_host} chips per host of {pool.machine_type}",
        )
        return
    hosts = chips // per_host
    if hosts == 1:
        return
    slice_ = (
        f"a multi-host {topology} slice ({chips} chips, {per_host} per host on "
        f"{pool.machine_type}) is {hosts} nodes and its pool holds exactly one slice"
    )
    if pool.max_nodes != hosts:
        more = " (for more slices, add one pool per slice)" if pool.max_nodes > hosts else ""
        add(f"{at}.max_nodes", f"{slice_}: set max_nodes to {hosts}{more}")
    if pool.min_nodes not in (0, hosts):
        add(
            f"{at}.min_nodes",
            f"{slice_}, scaled as a whole: set min_nodes to 0 or {hosts}",
        )


def _check_workload_types(config: FleetConfig, add: Any) -> None:
    for name, wt in config.workload_types.items():
        if not wt.priority_classes:
            add(
                f"workload_types.{name}.priority_classes", "at least one priority class is required"
            )
        if wt.max_idle_timeout_seconds is not None and wt.idle is None:
            add(
                f"workload_types.{name}.max_idle_timeout_seconds",
                "set, but the type has no idle rule",
            )
        if wt.idle is not None and wt.idle.grace_seconds > wt.idle.window_seconds:
            add(
                f"workload_types.{name}.idle.grace_seconds",
                grace_longer_than_window(wt.idle.grace_seconds, wt.idle.window_seconds),
            )


def _check_teams(config: FleetConfig, add: Any) -> None:
    resources = set(config.accelerator_resources())
    total: dict[str, int] = {}
    for pool in config.pools:
        if pool.model in catalog.MODELS and pool.model in config.models:
            total[pool.resource] = total.get(pool.resource, 0) + pool.capacity
    guaranteed_sum: dict[str, int] = {}

    for team in config.teams:
        at = f"teams[{team.name}]"
        for model in team.allowed_models or []:
            if model not in config.models:
                add(f"{at}.allowed_models", f"unknown model {model!r} (not in models)")
        default = team.default_model
        if default is not None:
            if default not in config.models:
                add(f"{at}.default_model", f"unknown model {default!r} (not in models)")
            elif default not in config.allowed_models(team):
                add(f"{at}.default_model", f"{default!r} is not among the team's allowed models")

        pools = [p for p in config.team_pools(team) if p.model in catalog.MODELS]
        capacity: dict[str, int] = {}
        for pool in pools:
            capacity[pool.resource] = capacity.get(pool.resource, 0) + pool.capacity
        for field, amounts in (("quota", team.quota), ("guaranteed", team.guaranteed)):
            for resource, amount in amounts.items():
                path = f"{at}.{field}[{resource}]"
                if resource not in labels.ACCELERATOR_RESOURCES:
                    known = ", ".join(sorted(labels.ACCELERATOR_RESOURCES))
                    add(path, f"unknown accelerator resource {resource!r} (known: {known})")
                    continue
                if amount < 0:
                    add(path, "must not be negative")
                    continue
                if resource not in resources and amount > 0:
                    add(path, f"no configured model provides {resource}")
                    continue
                if field == "quota" and amount > capacity.get(resource, 0):
                    held = ", ".join(
                        f"{p.name} {p.max_nodes}x{p.allocatable_per_node}"
                        for p in pools
                        if p.resource == resource
                    )
                    add(
                        path,
                        f"quota {amount} exceeds the {capacity.get(resource, 0)} {resource} "
                        f"the team's pools can ever hold ({held or 'no pools'})",
                    )
        for resource, amount in team.guaranteed.items():
            if amount > team.quota.get(resource, 0) and resource in labels.ACCELERATOR_RESOURCES:
                add(
                    f"{at}.guaranteed[{resource}]",
                    f"guarantee {amount} exceeds the team's quota {team.quota.get(resource, 0)}",
                )
            guaranteed_sum[resource] = guaranteed_sum.get(resource, 0) + max(amount, 0)

        for wt_name in team.budget_exempt_types:
            wt = config.workload_types.get(wt_name)
            path = f"{at}.budget_exempt_types"
            if wt is None:
                add(path, f"unknown workload type {wt_name!r}")
                continue
            if not wt.budget_exempt:
                add(path, f"workload type {wt_name!r} is not budget_exempt")
                continue
            if wt.capacity == "on-demand" and not any(
                p.capacity_type == "on-demand" for p in pools
            ):
                names = ", ".join(p.name for p in pools) or "none"
                add(
                    path,
                    f"budget-exempt type {wt_name!r} runs on on-demand capacity only, but every "
                    f"pool team {team.name!r} can use is spot (pools: {names})",
                )

    for resource, amount in guaranteed_sum.items():
        if resource in labels.ACCELERATOR_RESOURCES and amount > total.get(resource, 0):
            add(
                f"teams[*].guaranteed[{resource}]",
                f"guarantees add up to {amount}, more than the {total.get(resource, 0)} "
                f"{resource} in the fleet",
            )


def _check_approvals(config: FleetConfig, add: Any) -> None:
    teams = {team.name for team in config.teams}
    for name in _duplicates(grant.id for grant in config.approvals):
        add("approvals", f"approval id {name!r} is granted more than once")
    for grant in config.approvals:
        if grant.team not in teams:
            add(f"approvals[{grant.id}].team", f"unknown team {grant.team!r}")
        if grant.max_accelerators <= config.approval.threshold_accelerators:
            add(
                f"approvals[{grant.id}].max_accelerators",
                f"{grant.max_accelerators} needs no approval (approval.threshold_accelerators "
                f"is {config.approval.threshold_accelerators})",
            )


def _check_settings(config: FleetConfig, add: Any) -> None:
    if config.budget.warn_ratio > config.budget.deny_ratio:
        add("budget.warn_ratio", "must not be above deny_ratio")
    period = config.controller.period_seconds
    if period % 60 != 0 or 3600 % period != 0:
        add(
            "controller.period_seconds",
            f"{period} is not a whole number of minutes dividing an hour (e.g. 60, 120, 300, 600)",
        )
    if not config.opa.deploy and config.controller.opa_url is None:
        add("controller.opa_url", "required when opa.deploy is false (OPA runs elsewhere)")
    if config.opa.deploy and config.opa.image is None:
        add(
            "opa.image",
            "required with deploy: true: OPA's image by digest (REPOSITORY@sha256:...), as "
            "`fleetplane image build` prints it",
        )
    controller = config.controller
    if controller.deploy and not controller.suspend and controller.image is None:
        add(
            "controller.image",
            "required for a CronJob that runs: the controller's image by digest "
            "(REPOSITORY@sha256:...), as `fleetplane image build` prints it",
        )
    gateway = config.observability.pushgateway
    if not gateway.deploy and gateway.url is None:
        add(
            "observability.pushgateway.url",
            "required when pushgateway.deploy is false (the Pushgateway runs elsewhere)",
        )
    if config.opa.deploy and config.opa.external_url is not None:
        add("opa.external_url", "only with deploy: false (OPA runs outside the cluster)")
    for i, window in enumerate(config.upgrade.maintenance_windows):
        if window.end <= window.start:
            add(f"upgrade.maintenance_windows[{i}].end", "must be after start")


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------


def parse_fleet(raw: Any) -> FleetConfig:
    """A validated `FleetConfig` from plain data, or `ConfigError` listing every problem."""
    try:
        config = FleetConfig.model_validate(raw)
    except ValidationError as error:
        raise ConfigError(
            [
                Problem(
                    path=_format_loc(e["loc"], raw), reason=e["msg"].removeprefix("Value error, ")
                )
                for e in error.errors(include_url=False)
            ]
        ) from None
    problems = check_fleet(config)
    if problems:
        raise ConfigError(problems)
    return config


class _StrictLoader(yaml.SafeLoader):
    """A YAML loader that refuses duplicate mapping keys instead of keeping the last one."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise ConfigError(
                [
                    Problem(
                        path=f"line {key_node.start_mark.line + 1}",
                        reason=f"duplicate key {key!r}",
                    )
                ]
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_stack_file(path: Path) -> dict[str, Any]:
    """The `config` mapping of a `Pulumi.<stack>.yaml` file (duplicate keys are an error)."""
    document = yaml.load(path.read_text(encoding="utf-8"), Loader=_StrictLoader)
    config = (document or {}).get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError([Problem(path=str(path), reason="`config` is not a mapping")])
    return config


def load_stack_config(path: Path) -> FleetConfig:
    """The fleet of a `stacks/Pulumi.<stack>.yaml` file, read without Pulumi."""
    config = read_stack_file(path)
    if STACK_CONFIG_KEY not in config:
        raise ConfigError([Problem(path=str(path), reason=f"no {STACK_CONFIG_KEY!r} key")])
    return parse_fleet(config[STACK_CONFIG_KEY])
