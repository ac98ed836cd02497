"""Accelerator models with their prices, node pools with their derived capacity, and the
clusters that hold them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fleet import catalog
from fleet.config.autoscaling import Autoscaler, KarpenterConfig
from fleet.config.base import CapacityType, ConfigModel, MaxUnavailable, Name


class Prices(ConfigModel):
    """Price of one accelerator for one hour, in USD."""

    on_demand: float = Field(alias="on-demand", ge=0)
    """On-demand price (required)."""
    spot: float = Field(ge=0)
    """Spot price (required)."""


class ModelConfig(ConfigModel):
    """An accelerator model the fleet uses; its name must be in `fleet.catalog.MODELS`."""

    price_per_hour_usd: Prices
    """Per accelerator-hour prices (required)."""


class GpuSharingConfig(ConfigModel):
    """Several containers on one GPU (GKE `gpu_sharing_config`, GPU Operator device plugin)."""

    strategy: Literal["time-sharing", "mps"]
    """time-sharing or mps (required)."""
    max_shared_clients_per_gpu: int = Field(default=4, ge=2, le=48)
    """Containers per GPU; each one is a schedulable `nvidia.com/gpu`. Default 4."""


class PoolConfig(ConfigModel):
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
    autoscaler: Autoscaler | None = None
    """Who scales the pool: managed (EKS managed node group, GKE node pool autoscaling) or
    karpenter (a Karpenter NodePool); None for the cluster's `autoscaler`. Default None."""

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


class ClusterConfig(ConfigModel):
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
    autoscaler: Autoscaler = "managed"
    """Who scales the cluster's pools unless a pool says otherwise: managed (EKS managed node
    groups, GKE node pool autoscaling) or karpenter (Karpenter NodePools; aws and local
    clusters, GPU pools). Default managed."""
    karpenter: KarpenterConfig = Field(default_factory=KarpenterConfig)
    """Default see `KarpenterConfig`."""

    def autoscaler_for(self, pool: PoolConfig) -> Autoscaler:
        """Who scales the pool: its own choice, else this cluster's."""
        return pool.autoscaler or self.autoscaler

    @property
    def remote_name(self) -> str:
        return self.cluster_name or self.name
