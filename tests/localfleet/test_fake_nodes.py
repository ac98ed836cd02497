"""The local stack's pools as KWOK fake nodes that look like GPU Operator / GKE nodes."""

from __future__ import annotations

from collections import Counter

from fleet import labels
from fleet.config import FleetConfig
from fleet.nodes import observed_labels
from localfleet.fakenodes import fake_nodes, local_fake_pools

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
TPU_TAINT = {"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}
SPOT_TAINT = {"key": "fleetplane.dev/capacity-type", "value": "spot", "effect": "NoSchedule"}


def test_local_stack_has_16_gpu_nodes_of_8_and_4_tpu_hosts_of_4(
    stack_fleets: dict[str, FleetConfig],
) -> None:
    nodes = fake_nodes(local_fake_pools(stack_fleets["local"]))
    gpu = [n for n in nodes if labels.GPU_RESOURCE in n["status"]["capacity"]]
    tpu = [n for n in nodes if labels.TPU_RESOURCE in n["status"]["capacity"]]
    assert len(gpu) == 16 and len(tpu) == 4 and len(nodes) == 20
    assert {n["status"]["allocatable"][labels.GPU_RESOURCE] for n in gpu} == {"8"}
    assert {n["status"]["allocatable"][labels.TPU_RESOURCE] for n in tpu} == {"4"}
    assert Counter(n["metadata"]["labels"][labels.CAPACITY_TYPE] for n in gpu) == {
        "on-demand": 8,
        "spot": 8,
    }


def test_fake_pools_carry_operator_and_cloud_labels(stack_fleets: dict[str, FleetConfig]) -> None:
    fleet = stack_fleets["local"]
    pools = {p.name: p for p in local_fake_pools(fleet)}

    h100 = pools["h100-ondemand"]
    assert h100.count == 8 and h100.per_node == 8 and h100.resource == labels.GPU_RESOURCE
    assert h100.labels == {
        "node.kubernetes.io/instance-type": "p5.48xlarge",
        "eks.amazonaws.com/nodegroup": "h100-ondemand",
        "eks.amazonaws.com/capacityType": "ON_DEMAND",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.family": "hopper",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/gpu.deploy.driver": "true",
        "nvidia.com/cuda.driver.major": "570",
        "nvidia.com/cuda.driver.minor": "124",
        "nvidia.com/cuda.driver.rev": "06",
        "fleetplane.dev/pool": "h100-ondemand",
        "fleetplane.dev/capacity-type": "on-demand",
    }
    assert h100.taints == [GPU_TAINT]

    a100 = pools["a100-spot"]
    assert a100.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
    assert a100.labels["eks.amazonaws.com/capacityType"] == "SPOT"
    assert a100.labels["fleetplane.dev/capacity-type"] == "spot"
    assert a100.taints == [GPU_TAINT, SPOT_TAINT]

    tpu = pools["tpu-v5e"]
    assert tpu.count == 4 and tpu.per_node == 4 and tpu.resource == labels.TPU_RESOURCE
    assert tpu.labels["cloud.google.com/gke-tpu-accelerator"] == "tpu-v5-lite-podslice"
    assert tpu.labels["cloud.google.com/gke-tpu-topology"] == "4x4"
    assert tpu.labels["cloud.google.com/gke-nodepool"] == "tpu-v5e"
    assert tpu.labels["node.kubernetes.io/instance-type"] == "ct5lp-hightpu-4t"
    assert "cloud.google.com/gke-spot" not in tpu.labels
    assert tpu.taints == [TPU_TAINT]


def test_spot_tpu_and_shared_gpu_labels(stack_fleets: dict[str, FleetConfig]) -> None:
    fleet = stack_fleets["prod"]
    by_name = {p.name: p for p in fleet.pools}
    spot_tpu = observed_labels(fleet, by_name["tpu-v5e-4x4-spot"])
    assert spot_tpu["cloud.google.com/gke-spot"] == "true"
    assert spot_tpu["cloud.google.com/gke-tpu-topology"] == "4x4"
    shared = observed_labels(fleet, by_name["l4-notebooks"])
    assert shared["nvidia.com/gpu.replicas"] == "4"
    assert shared["nvidia.com/gpu.sharing-strategy"] == "time-sharing"
    assert shared["cloud.google.com/gke-accelerator"] == "nvidia-l4"
    assert shared["nvidia.com/gpu.deploy.driver"] == "false"  # GKE installs it


def test_label_values_are_valid_kubernetes_label_values(
    stack_fleets: dict[str, FleetConfig],
) -> None:
    import re

    value = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
    for fleet in stack_fleets.values():
        for pool in fleet.pools:
            for key, val in observed_labels(fleet, pool).items():
                assert len(val) <= 63 and value.match(val), (pool.name, key, val)


def test_only_local_clusters_have_fake_nodes(stack_fleets: dict[str, FleetConfig]) -> None:
    assert local_fake_pools(stack_fleets["prod"]) == []
    assert local_fake_pools(stack_fleets["local"], cluster="elsewhere") == []
