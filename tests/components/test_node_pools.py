"""GpuNodePool and TpuNodePool under the Pulumi mocks: what each cloud resource asks for."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from components.nodepools import NodePoolArgs, node_pool_for
from fleet.config import FleetConfig
from fleet.nodes import observed_labels
from tests.components.component_testkit import Declare, Declared

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}
TPU_TAINT = {"key": "google.com/tpu", "value": "present", "effect": "NO_SCHEDULE"}
SPOT_TAINT = {"key": "fleetplane.dev/capacity-type", "value": "spot", "effect": "NO_SCHEDULE"}
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
NODE_POOL = "gcp:container/nodePool:NodePool"

FleetFrom = Callable[[Callable[[dict[str, Any]], None] | None], FleetConfig]


def to_eks(raw: dict[str, Any]) -> None:
    raw["clusters"] = [
        {
            "name": "eks",
            "provider": "aws",
            "cluster_name": "fleet-dev",
            "region": "us-west-2",
            "node_role_arn": "arn:aws:iam::123456789012:role/gpu-nodes",
            "subnet_ids": ["subnet-1", "subnet-2"],
            "pools": [
                {
                    "name": "a100-spot",
                    "model": "a100-40gb",
                    "machine_type": "p4d.24xlarge",
                    "capacity_type": "spot",
                    "min_nodes": 1,
                    "max_nodes": 6,
                    "max_unavailable": "25%",
                },
                {
                    "name": "h100-mig",
                    "model": "h100-80gb",
                    "machine_type": "p5.48xlarge",
                    "driver_manager": "gpu-operator",
                    "mig_profile": "1g.10gb",
                    "max_nodes": 2,
                    "max_unavailable": 1,
                },
                {
                    "name": "a10g-mps",
                    "model": "a10g",
                    "machine_type": "g5.xlarge",
                    "max_nodes": 4,
                    "gpu_sharing": {"strategy": "mps", "max_shared_clients_per_gpu": 8},
                },
            ],
        }
    ]
    raw["models"] = {
        m: {"price_per_hour_usd": {"on-demand": 2.0, "spot": 1.0}}
        for m in ("a100-40gb", "h100-80gb", "a10g")
    }
    raw["teams"][0]["quota"] = {"nvidia.com/gpu": 16}


def add_gke_native_pool(raw: dict[str, Any]) -> None:
    raw["models"]["a100-40gb"] = {"price_per_hour_usd": {"on-demand": 3.0, "spot": 1.0}}
    raw["clusters"][0]["pools"].append(
        {
            "name": "a100-native",
            "model": "a100-40gb",
            "machine_type": "a2-highgpu-1g",
            "driver_manager": "cloud",
            "mig_profile": "1g.5gb",
            "gpu_sharing": {"strategy": "time-sharing", "max_shared_clients_per_gpu": 2},
            "max_nodes": 3,
        }
    )


def declare_pool(declare: Declare, fleet: FleetConfig, name: str) -> Declared:
    pool = next(p for p in fleet.pools if p.name == name)
    cluster = fleet.cluster_of(pool)
    return declare(
        lambda: node_pool_for(
            f"{cluster.name}-{pool.name}", NodePoolArgs(fleet=fleet, cluster=cluster, pool=pool)
        )
    )


# (pool, expected EKS node group inputs (subset))
EKS_CASES: list[tuple[str, dict[str, Any]]] = [
    (
        "a100-spot",
        {
            "clusterName": "fleet-dev",
            "nodeGroupName": "a100-spot",
            "nodeRoleArn": "arn:aws:iam::123456789012:role/gpu-nodes",
            "subnetIds": ["subnet-1", "subnet-2"],
            "instanceTypes": ["p4d.24xlarge"],
            "amiType": "AL2023_x86_64_NVIDIA",
            "capacityType": "SPOT",
            "scalingConfig": {"minSize": 1, "maxSize": 6, "desiredSize": 1},
            "updateConfig": {"maxUnavailablePercentage": 25},
            "taints": [GPU_TAINT, SPOT_TAINT],
            "labels": {"fleetplane.dev/pool": "a100-spot", "fleetplane.dev/capacity-type": "spot"},
        },
    ),
    (
        "h100-mig",
        {
            "amiType": "AL2023_x86_64_STANDARD",  # the GPU Operator installs the driver
            "capacityType": "ON_DEMAND",
            "scalingConfig": {"minSize": 0, "maxSize": 2, "desiredSize": 0},
            "updateConfig": {"maxUnavailable": 1},
            "taints": [GPU_TAINT],
            "labels": {
                "fleetplane.dev/pool": "h100-mig",
                "fleetplane.dev/capacity-type": "on-demand",
                "nvidia.com/mig.config": "all-1g.10gb",
            },
        },
    ),
    (
        "a10g-mps",
        {
            "instanceTypes": ["g5.xlarge"],
            "labels": {
                "fleetplane.dev/pool": "a10g-mps",
                "fleetplane.dev/capacity-type": "on-demand",
                "nvidia.com/device-plugin.config": "a10g-mps",
            },
        },
    ),
]


@pytest.mark.parametrize(("pool", "want"), EKS_CASES, ids=[c[0] for c in EKS_CASES])
def test_eks_node_group(
    pool: str, want: dict[str, Any], declare: Declare, fleet_from: FleetFrom
) -> None:
    declared = declare_pool(declare, fleet_from(to_eks), pool)
    got = declared.one(NODE_GROUP).inputs
    assert {k: got.get(k) for k in want} == want
    assert not declared.of_type(NODE_POOL)
    assert all("fleetplane:nodepools:GpuNodePool$" in u for u in declared.urns if NODE_GROUP in u)


# (pool, expected GKE node pool inputs (subset), expected guest accelerator)
GKE_GPU_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "h100",
        {
            "name": "h100",
            "cluster": "gke",
            "location": "us-central1",
            "project": "acme",
            "autoscaling": {
                "totalMinNodeCount": 0,
                "totalMaxNodeCount": 2,
                "locationPolicy": "BALANCED",
            },
        },
        {
            "type": "nvidia-h100-80gb",
            "count": 8,
            "gpuDriverInstallationConfig": {"gpuDriverVersion": "INSTALLATION_DISABLED"},
        },
    ),
    (
        "h100-spot",
        {"autoscaling": {"totalMinNodeCount": 0, "totalMaxNodeCount": 4, "locationPolicy": "ANY"}},
        {
            "type": "nvidia-h100-80gb",
            "count": 8,
            "gpuDriverInstallationConfig": {"gpuDriverVersion": "INSTALLATION_DISABLED"},
        },
    ),
    (
        "a100-native",
        {
            "autoscaling": {
                "totalMinNodeCount": 0,
                "totalMaxNodeCount": 3,
                "locationPolicy": "BALANCED",
            }
        },
        {
            "type": "nvidia-tesla-a100",
            "count": 1,
            "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"},
            "gpuSharingConfig": {
                "gpuSharingStrategy": "TIME_SHARING",
                "maxSharedClientsPerGpu": 2,
            },
            "gpuPartitionSize": "1g.5gb",
        },
    ),
]


@pytest.mark.parametrize(
    ("pool", "want", "accelerator"), GKE_GPU_CASES, ids=[c[0] for c in GKE_GPU_CASES]
)
def test_gke_gpu_node_pool(
    pool: str,
    want: dict[str, Any],
    accelerator: dict[str, Any],
    declare: Declare,
    fleet_from: FleetFrom,
) -> None:
    fleet = fleet_from(add_gke_native_pool)
    declared = declare_pool(declare, fleet, pool)
    got = declared.one(NODE_POOL).inputs
    assert {k: got.get(k) for k in want} == want
    node = got["nodeConfig"]
    assert node["guestAccelerators"] == [accelerator]
    spot = pool.endswith("spot")
    assert node["spot"] is spot
    assert node["taints"] == ([GPU_TAINT, SPOT_TAINT] if spot else [GPU_TAINT])
    assert node["labels"]["fleetplane.dev/pool"] == pool
    assert node["labels"]["fleetplane.dev/capacity-type"] == ("spot" if spot else "on-demand")
    native = pool == "a100-native"
    assert node["imageType"] == ("COS_CONTAINERD" if native else "UBUNTU_CONTAINERD")
    assert ("gke-no-default-nvidia-gpu-device-plugin" in node["labels"]) is not native
    assert got["upgradeSettings"] == {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}


@pytest.mark.parametrize("capacity", ["on-demand", "spot"])
def test_gke_tpu_slice_pool(capacity: str, declare: Declare, fleet_from: FleetFrom) -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["clusters"][0]["pools"][2]["capacity_type"] = capacity

    declared = declare_pool(declare, fleet_from(edit), "tpu")
    got = declared.one(NODE_POOL).inputs
    assert got["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "2x4"}
    assert got["autoscaling"]["totalMaxNodeCount"] == 2
    node = got["nodeConfig"]
    assert node["machineType"] == "ct5lp-hightpu-4t"
    assert node["spot"] is (capacity == "spot")
    assert node["taints"] == ([TPU_TAINT, SPOT_TAINT] if capacity == "spot" else [TPU_TAINT])
    assert node["labels"] == {
        "fleetplane.dev/pool": "tpu",
        "fleetplane.dev/capacity-type": capacity,
    }
    assert "guestAccelerators" not in node
    assert declared.one("fleetplane:nodepools:TpuNodePool").custom is False


def test_local_pools_declare_no_cloud_resource(
    declare: Declare, stack_fleets: dict[str, FleetConfig]
) -> None:
    fleet = stack_fleets["local"]
    for pool in fleet.pools:
        declared = declare_pool(declare, fleet, pool.name)
        assert [r.typ for r in declared.registrations] == [
            "fleetplane:nodepools:TpuNodePool"
            if pool.accelerator.is_tpu
            else "fleetplane:nodepools:GpuNodePool"
        ]


def add_a3_mega_pool(raw: dict[str, Any]) -> None:
    raw["clusters"][0]["pools"].append(
        {"name": "h100-mega", "model": "h100-80gb", "machine_type": "a3-megagpu-8g", "max_nodes": 2}
    )


def test_gke_a3_mega_pool_asks_for_the_mega_accelerator(
    declare: Declare, fleet_from: FleetFrom
) -> None:
    """A3 Mega takes GKE accelerator type nvidia-h100-mega-80gb, not A3 High's
    nvidia-h100-80gb; its GPUs are still reported as H100 80GB HBM3."""
    fleet = fleet_from(add_a3_mega_pool)
    got = declare_pool(declare, fleet, "h100-mega").one(NODE_POOL).inputs
    assert got["nodeConfig"]["machineType"] == "a3-megagpu-8g"
    assert got["nodeConfig"]["guestAccelerators"] == [
        {
            "type": "nvidia-h100-mega-80gb",
            "count": 8,
            "gpuDriverInstallationConfig": {"gpuDriverVersion": "INSTALLATION_DISABLED"},
        }
    ]
    pool = next(p for p in fleet.pools if p.name == "h100-mega")
    observed = observed_labels(fleet, pool)
    assert observed["cloud.google.com/gke-accelerator"] == "nvidia-h100-mega-80gb"
    assert observed["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    # A3 High keeps the model's accelerator type
    high = next(p for p in fleet.pools if p.name == "h100")
    assert high.machine_type == "a3-highgpu-8g"
    assert observed_labels(fleet, high)["cloud.google.com/gke-accelerator"] == "nvidia-h100-80gb"


@pytest.mark.parametrize(
    ("location", "zones", "min_nodes", "per_zone"),
    [
        ("us-central1", ["us-central1-a", "us-central1-b", "us-central1-c"], 2, 1),
        ("us-central1", ["us-central1-a", "us-central1-b", "us-central1-c"], 4, 2),
        ("us-central1", ["us-central1-a", "us-central1-c"], 2, 1),
        ("us-central1", ["us-central1-a"], 2, 2),
        ("us-central1", ["us-central1-a", "us-central1-b", "us-central1-c"], 0, 0),
        # no zones: a regional cluster's node locations are not known here
        ("us-central1", [], 2, 0),
        # no zones in a zonal cluster: its one zone
        ("us-central1-a", [], 2, 2),
    ],
)
@pytest.mark.parametrize("pool_name", ["h100", "tpu"])
def test_gke_initial_node_count_is_per_zone(
    location: str,
    zones: list[str],
    min_nodes: int,
    per_zone: int,
    pool_name: str,
    declare: Declare,
    fleet_from: FleetFrom,
) -> None:
    """GKE's initialNodeCount is per zone, the autoscaling bounds are totals: the pool starts at
    its minimum or just above, never at min_nodes in every zone."""

    def edit(raw: dict[str, Any]) -> None:
        raw["clusters"][0]["region"] = location
        pool = next(p for p in raw["clusters"][0]["pools"] if p["name"] == pool_name)
        pool["zones"] = zones
        pool["min_nodes"] = min_nodes
        pool["max_nodes"] = max(pool.get("max_nodes", 0), min_nodes, 1)
        if pool_name == "tpu" and min_nodes:
            # A multi-host TPU pool is one slice: pick the one whose hosts are min_nodes.
            pool["tpu_topology"] = {2: "2x4", 4: "4x4"}[min_nodes]

    got = declare_pool(declare, fleet_from(edit), pool_name).one(NODE_POOL).inputs
    assert got["initialNodeCount"] == per_zone
    assert got["autoscaling"]["totalMinNodeCount"] == min_nodes
    if zones:
        assert got["nodeLocations"] == zones
        assert min_nodes <= per_zone * len(zones) < min_nodes + len(zones)
