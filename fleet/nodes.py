"""What the nodes of a pool look like: the labels and taints we declare, and the ones the GPU
Operator, GKE and the kubelet add.

The cloud node pools declare `declared_labels` and `node_taints`; the fake nodes of the local
stack carry `observed_labels` (declared plus discovered), so policies and the controller see
the same node shapes locally as in the clouds.
"""

from __future__ import annotations

from fleet import catalog, labels
from fleet.config import FleetConfig, PoolConfig

GKE_NO_DEFAULT_DEVICE_PLUGIN = "gke-no-default-nvidia-gpu-device-plugin"
"""Node label that keeps GKE's own device plugin off nodes where the GPU Operator's runs."""


def uses_native_gke_gpu_features(config: FleetConfig, pool: PoolConfig) -> bool:
    """GKE pools whose driver, sharing and MIG are GKE's (driver_manager cloud)."""
    return (
        config.cluster_of(pool).provider == "gcp"
        and not pool.accelerator.is_tpu
        and config.driver_manager(pool) == "cloud"
    )


def device_plugin_config_name(pool: PoolConfig) -> str:
    """Key of the pool's entry in the GPU Operator device-plugin config (sharing)."""
    return pool.name


def declared_labels(config: FleetConfig, pool: PoolConfig) -> dict[str, str]:
    """Labels the node pool sets on its nodes (what the cloud APIs accept from us)."""
    out = {
        labels.POOL: pool.name,
        labels.CAPACITY_TYPE: pool.capacity_type,
    }
    if not pool.accelerator.is_tpu:
        if uses_native_gke_gpu_features(config, pool):
            # GKE installs the driver and runs its device plugin: keep the operator's off.
            out[labels.DEPLOY_DRIVER] = "false"
            out["nvidia.com/gpu.deploy.device-plugin"] = "false"
            out["nvidia.com/gpu.deploy.mig-manager"] = "false"
        else:
            if config.cluster_of(pool).provider == "gcp":
                out[GKE_NO_DEFAULT_DEVICE_PLUGIN] = "true"
            if pool.gpu_sharing is not None:
                out[labels.DEVICE_PLUGIN_CONFIG] = device_plugin_config_name(pool)
            if pool.mig_profile is not None:
                out[labels.MIG_CONFIG] = f"all-{pool.mig_profile}"
    out.update(pool.labels)
    return out


def node_taints(pool: PoolConfig) -> list[dict[str, str]]:
    """Taints of every node of the pool, in Kubernetes form."""
    taints = [dict(labels.TPU_TAINT if pool.accelerator.is_tpu else labels.GPU_TAINT)]
    if pool.capacity_type == "spot":
        taints.append(dict(labels.SPOT_TAINT))
    return taints


def observed_labels(config: FleetConfig, pool: PoolConfig) -> dict[str, str]:
    """Labels a node of the pool carries once running: declared plus those the GPU Operator
    (GPU Feature Discovery), the cloud and the kubelet add."""
    model = pool.accelerator
    machine = catalog.MACHINE_TYPES.get(pool.machine_type)
    cloud = machine.cloud if machine else config.cluster_of(pool).provider
    out: dict[str, str] = {labels.INSTANCE_TYPE: pool.machine_type}
    spot = pool.capacity_type == "spot"
    if cloud == "gcp":
        out[labels.GKE_NODEPOOL] = pool.name
        if spot:
            out[labels.GKE_SPOT] = "true"
        if pool.gke_accelerator:
            out[labels.GKE_ACCELERATOR] = pool.gke_accelerator
    elif cloud == "aws":
        out[labels.EKS_NODEGROUP] = pool.name
        out[labels.EKS_CAPACITY_TYPE] = "SPOT" if spot else "ON_DEMAND"
    if model.is_tpu:
        out[labels.TPU_ACCELERATOR] = model.label_value
        out[labels.TPU_TOPOLOGY] = pool.tpu_topology or ""
    else:
        out.update(_gpu_feature_discovery_labels(config, pool))
    out.update(declared_labels(config, pool))
    return out


def _gpu_feature_discovery_labels(config: FleetConfig, pool: PoolConfig) -> dict[str, str]:
    model = pool.accelerator
    out = {
        labels.GPU_PRESENT: "true",
        labels.GPU_PRODUCT: model.label_value,
        labels.GPU_COUNT: str(pool.accelerators),
        labels.GPU_MEMORY: str(model.memory_mib),
        labels.GPU_FAMILY: model.family,
        labels.MIG_CAPABLE: "true" if model.mig_profiles else "false",
    }
    if config.driver_manager(pool) == "gpu-operator":
        out[labels.DEPLOY_DRIVER] = "true"
        version = config.driver_version(pool) or ""
    else:
        # The operator finds the image's driver and leaves it alone.
        out[labels.DEPLOY_DRIVER] = "pre-installed"
        version = config.gpu_operator.driver_version
    major, minor, rev = ([*version.split("."), "0", "0"])[:3]
    out[labels.CUDA_DRIVER_MAJOR] = major
    out[labels.CUDA_DRIVER_MINOR] = minor
    out[labels.CUDA_DRIVER_REV] = rev
    if pool.gpu_sharing is not None:
        out[labels.GPU_REPLICAS] = str(pool.gpu_sharing.max_shared_clients_per_gpu)
        out[labels.GPU_SHARING_STRATEGY] = pool.gpu_sharing.strategy
    if pool.mig_profile is not None:
        out["nvidia.com/mig.strategy"] = config.gpu_operator.mig_strategy
    return out
