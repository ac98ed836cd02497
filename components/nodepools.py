"""GPU and TPU node pools: EKS managed node groups, GKE node pools, or local fake nodes."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_gcp as gcp

from components.cloud_upgrades import eks_update_config, gke_upgrade_settings
from fleet.config import ClusterConfig, FleetConfig, PoolConfig
from fleet.nodes import declared_labels, node_taints, uses_native_gke_gpu_features

GKE_OAUTH_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
_GCP_ZONE = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")  # us-central1-a; a region has no suffix
_EFFECTS = {
    "NoSchedule": "NO_SCHEDULE",
    "PreferNoSchedule": "PREFER_NO_SCHEDULE",
    "NoExecute": "NO_EXECUTE",
}


@dataclass(frozen=True, kw_only=True)
class NodePoolArgs:
    """fleet: the validated fleet; cluster and pool: which pool of which cluster;
    provider: the aws/gcp provider of the cluster (None: the default provider)."""

    fleet: FleetConfig
    cluster: ClusterConfig
    pool: PoolConfig
    provider: pulumi.ProviderResource | None = None


def _cloud_taints(pool: PoolConfig) -> list[dict[str, str]]:
    return [{**t, "effect": _EFFECTS[t["effect"]]} for t in node_taints(pool)]


def _gke_scaling(pool: PoolConfig) -> gcp.container.NodePoolAutoscalingArgs:
    # Totals across zones; spot capacity comes from whichever zone has it.
    return gcp.container.NodePoolAutoscalingArgs(
        total_min_node_count=pool.min_nodes,
        total_max_node_count=pool.max_nodes,
        location_policy="ANY" if pool.capacity_type == "spot" else "BALANCED",
    )


def _gke_initial_node_count(cluster: ClusterConfig, pool: PoolConfig) -> int:
    """GKE's initialNodeCount is per zone of the pool, while autoscaling's total_min/total_max
    count the whole pool: `min_nodes` per zone would start a pool over 3 zones at 3x its
    minimum. Spread the minimum instead, rounding up (total at or just above the minimum).
    Without `zones` the pool takes the cluster's node locations: one zone for a zonal cluster;
    for a regional one their number is not known here, so start at 0 and leave the floor to
    total_min_node_count rather than overshoot on expensive accelerators."""
    if pool.zones:
        return math.ceil(pool.min_nodes / len(pool.zones))
    if _GCP_ZONE.match(cluster.region):
        return pool.min_nodes
    return 0


def _gke_common(cluster: ClusterConfig, pool: PoolConfig) -> dict[str, Any]:
    return {
        "name": pool.name,
        "cluster": cluster.remote_name,
        "location": cluster.region,
        "project": cluster.project,
        "node_locations": list(pool.zones) or None,
        "initial_node_count": _gke_initial_node_count(cluster, pool),
        "autoscaling": _gke_scaling(pool),
        # Under a release channel GKE refuses auto_upgrade off; what keeps its node upgrades
        # (on COS pools, the driver's) to the fleet's windows is the cluster's maintenance
        # policy (components.cloud_upgrades.GkeUpgradePolicy).
        "management": gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
        "upgrade_settings": gke_upgrade_settings(pool),
    }


def _gke_taints(pool: PoolConfig) -> list[gcp.container.NodePoolNodeConfigTaintArgs]:
    return [gcp.container.NodePoolNodeConfigTaintArgs(**t) for t in _cloud_taints(pool)]


class GpuNodePool(pulumi.ComponentResource):
    """A pool of GPU nodes.

    aws: an EKS managed node group (AL2023 NVIDIA AMI when the image provides the driver,
    the standard AL2023 AMI when the GPU Operator installs it). gcp: a GKE node pool with
    guest accelerators; with driver_manager cloud, GKE installs the driver and provides
    time-sharing/MPS and MIG partitions natively, otherwise GKE's driver installation is off
    and the GPU Operator does it all. local: no cloud resource; the local control plane
    creates the fake nodes (`localfleet.fakenodes.local_fake_pools`) and the pool is recorded
    in the outputs.
    """

    node_group: aws.eks.NodeGroup | None
    node_pool: gcp.container.NodePool | None

    def __init__(
        self, name: str, args: NodePoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("fleetplane:nodepools:GpuNodePool", name, None, opts)
        fleet, cluster, pool = args.fleet, args.cluster, args.pool
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        self.node_group = None
        self.node_pool = None
        labels = declared_labels(fleet, pool)
        # A Karpenter pool is a NodePool (components.karpenter), not a managed node group.
        if cluster.provider == "aws" and cluster.autoscaler_for(pool) == "managed":
            self.node_group = self._eks(name, fleet, cluster, pool, labels, child)
        elif cluster.provider == "gcp":
            self.node_pool = self._gke(name, fleet, cluster, pool, labels, child)
        self.register_outputs(_pool_outputs(fleet, cluster, pool, labels))

    @staticmethod
    def _eks(
        name: str,
        fleet: FleetConfig,
        cluster: ClusterConfig,
        pool: PoolConfig,
        labels: dict[str, str],
        child: pulumi.ResourceOptions,
    ) -> aws.eks.NodeGroup:
        image_has_driver = fleet.driver_manager(pool) == "cloud"
        return aws.eks.NodeGroup(
            name,
            aws.eks.NodeGroupArgs(
                cluster_name=cluster.remote_name,
                node_group_name=pool.name,
                node_role_arn=cluster.node_role_arn,
                subnet_ids=list(cluster.subnet_ids),
                instance_types=[pool.machine_type],
                ami_type="AL2023_x86_64_NVIDIA" if image_has_driver else "AL2023_x86_64_STANDARD",
                capacity_type="SPOT" if pool.capacity_type == "spot" else "ON_DEMAND",
                scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                    min_size=pool.min_nodes,
                    max_size=pool.max_nodes,
                    desired_size=pool.min_nodes,
                ),
                disk_size=pool.disk_size_gb,
                labels=labels,
                taints=[aws.eks.NodeGroupTaintArgs(**t) for t in _cloud_taints(pool)],
                update_config=eks_update_config(pool),
                tags={"fleetplane.dev/pool": pool.name, "fleetplane.dev/cluster": cluster.name},
            ),
            # The cluster autoscaler owns the current size.
            opts=pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(ignore_changes=["scalingConfig.desiredSize"])
            ),
        )

    @staticmethod
    def _gke(
        name: str,
        fleet: FleetConfig,
        cluster: ClusterConfig,
        pool: PoolConfig,
        labels: dict[str, str],
        child: pulumi.ResourceOptions,
    ) -> gcp.container.NodePool:
        native = uses_native_gke_gpu_features(fleet, pool)
        accelerator: dict[str, Any] = {
            "type": pool.gke_accelerator,
            "count": pool.accelerators,
            "gpu_driver_installation_config": gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                gpu_driver_version="LATEST" if native else "INSTALLATION_DISABLED"
            ),
        }
        if native and pool.gpu_sharing is not None:
            accelerator["gpu_sharing_config"] = (
                gcp.container.NodePoolNodeConfigGuestAcceleratorGpuSharingConfigArgs(
                    gpu_sharing_strategy="MPS"
                    if pool.gpu_sharing.strategy == "mps"
                    else "TIME_SHARING",
                    max_shared_clients_per_gpu=pool.gpu_sharing.max_shared_clients_per_gpu,
                )
            )
        if native and pool.mig_profile is not None:
            accelerator["gpu_partition_size"] = pool.mig_profile
        return gcp.container.NodePool(
            name,
            gcp.container.NodePoolArgs(
                **_gke_common(cluster, pool),
                node_config=gcp.container.NodePoolNodeConfigArgs(
                    machine_type=pool.machine_type,
                    spot=pool.capacity_type == "spot",
                    # The GPU Operator's driver container needs Ubuntu; GKE's own needs COS.
                    image_type="COS_CONTAINERD" if native else "UBUNTU_CONTAINERD",
                    disk_size_gb=pool.disk_size_gb,
                    labels=labels,
                    taints=_gke_taints(pool),
                    guest_accelerators=[
                        gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(**accelerator)
                    ],
                    oauth_scopes=GKE_OAUTH_SCOPES,
                    service_account=cluster.node_service_account or None,
                ),
            ),
            opts=pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(ignore_changes=["initialNodeCount"])
            ),
        )


class TpuNodePool(pulumi.ComponentResource):
    """A pool of TPU slices: a GKE TPU node pool (machine type, compact placement with the
    slice topology, spot), tainted `google.com/tpu=present:NoSchedule`. local: recorded only."""

    node_pool: gcp.container.NodePool | None

    def __init__(
        self, name: str, args: NodePoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("fleetplane:nodepools:TpuNodePool", name, None, opts)
        fleet, cluster, pool = args.fleet, args.cluster, args.pool
        if cluster.provider == "aws":
            raise ValueError(f"TPU pool {pool.name!r} cannot live in EKS cluster {cluster.name!r}")
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        labels = declared_labels(fleet, pool)
        self.node_pool = None
        if cluster.provider == "gcp":
            self.node_pool = gcp.container.NodePool(
                name,
                gcp.container.NodePoolArgs(
                    **_gke_common(cluster, pool),
                    placement_policy=gcp.container.NodePoolPlacementPolicyArgs(
                        type="COMPACT", tpu_topology=pool.tpu_topology
                    ),
                    node_config=gcp.container.NodePoolNodeConfigArgs(
                        machine_type=pool.machine_type,
                        spot=pool.capacity_type == "spot",
                        disk_size_gb=pool.disk_size_gb,
                        labels=labels,
                        taints=_gke_taints(pool),
                        oauth_scopes=GKE_OAUTH_SCOPES,
                        service_account=cluster.node_service_account or None,
                    ),
                ),
                opts=pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(ignore_changes=["initialNodeCount"])
                ),
            )
        self.register_outputs(_pool_outputs(fleet, cluster, pool, labels))


def _pool_outputs(
    fleet: FleetConfig, cluster: ClusterConfig, pool: PoolConfig, labels: dict[str, str]
) -> dict[str, Any]:
    return {
        "pool": pool.name,
        "cluster": cluster.name,
        "provider": cluster.provider,
        "model": pool.model,
        "resource": pool.resource,
        "capacity_type": pool.capacity_type,
        "min_nodes": pool.min_nodes,
        "max_nodes": pool.max_nodes,
        "allocatable_per_node": pool.allocatable_per_node,
        "labels": labels,
        "taints": node_taints(pool),
        "driver_version": fleet.driver_version(pool),
    }


def node_pool_for(
    name: str, args: NodePoolArgs, opts: pulumi.ResourceOptions | None = None
) -> GpuNodePool | TpuNodePool:
    """The right component for the pool's accelerator."""
    if args.pool.accelerator.is_tpu:
        return TpuNodePool(name, args, opts)
    return GpuNodePool(name, args, opts)
