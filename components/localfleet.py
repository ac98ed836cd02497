"""Fake accelerator nodes for the local stack, managed by KWOK.

A `FakePool` describes a pool of identical nodes as the cloud and the GPU Operator would
present them (capacity, labels, taints); `fake_nodes` turns pools into Node manifests that the
local control plane creates and KWOK keeps Ready. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_VALUE = "fake"


@dataclass(frozen=True, kw_only=True)
class FakePool:
    """A pool of identical fake nodes.

    name: pool name; nodes are called `<name>-<index>`.
    count: number of nodes.
    resource: extended resource the accelerators are exposed as (`nvidia.com/gpu`, `google.com/tpu`).
    per_node: accelerators per node.
    labels: node labels (GPU Operator / cloud labels, pool and capacity-type labels).
    taints: node taints as Kubernetes dicts (`key`, `value`, `effect`).
    cpu, memory, pods: ordinary allocatable capacity of each node.
    """

    name: str
    count: int
    resource: str
    per_node: int
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    cpu: str = "96"
    memory: str = "1536Gi"
    pods: str = "110"


def fake_nodes(pools: list[FakePool]) -> list[dict[str, Any]]:
    """Node manifests for every node of every pool, in pool order."""
    nodes: list[dict[str, Any]] = []
    for pool in pools:
        capacity = {
            "cpu": pool.cpu,
            "memory": pool.memory,
            "pods": pool.pods,
            pool.resource: str(pool.per_node),
        }
        for index in range(pool.count):
            name = f"{pool.name}-{index}"
            labels = {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                **pool.labels,
            }
            nodes.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": name,
                        "labels": labels,
                        "annotations": {KWOK_NODE_ANNOTATION: KWOK_NODE_VALUE},
                    },
                    "spec": {"taints": [dict(taint) for taint in pool.taints]},
                    "status": {
                        "capacity": dict(capacity),
                        "allocatable": dict(capacity),
                    },
                }
            )
    return nodes


def default_pools() -> list[FakePool]:
    """The fleet used when no stack configuration is given: 16 GPU nodes and 4 TPU hosts."""
    gpu_taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    spot_taint = {"key": "fleetplane.dev/capacity-type", "value": "spot", "effect": "NoSchedule"}

    def gpu_labels(
        pool: str, product: str, memory_mib: int, capacity: str, instance: str
    ) -> dict[str, str]:
        return {
            "fleetplane.dev/pool": pool,
            "fleetplane.dev/capacity-type": capacity,
            "node.kubernetes.io/instance-type": instance,
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": product,
            "nvidia.com/gpu.count": "8",
            "nvidia.com/gpu.memory": str(memory_mib),
            "nvidia.com/gpu.deploy.driver": "true",
            "nvidia.com/cuda.driver.major": "570",
            "nvidia.com/cuda.driver.minor": "124",
            "nvidia.com/cuda.driver.rev": "06",
        }

    return [
        FakePool(
            name="h100-ondemand",
            count=8,
            resource="nvidia.com/gpu",
            per_node=8,
            labels=gpu_labels(
                "h100-ondemand", "NVIDIA-H100-80GB-HBM3", 81559, "on-demand", "p5.48xlarge"
            ),
            taints=[gpu_taint],
        ),
        FakePool(
            name="a100-spot",
            count=8,
            resource="nvidia.com/gpu",
            per_node=8,
            labels=gpu_labels("a100-spot", "NVIDIA-A100-SXM4-40GB", 40960, "spot", "p4d.24xlarge"),
            taints=[gpu_taint, spot_taint],
        ),
        FakePool(
            name="tpu-v5e",
            count=4,
            resource="google.com/tpu",
            per_node=4,
            labels={
                "fleetplane.dev/pool": "tpu-v5e",
                "fleetplane.dev/capacity-type": "on-demand",
                "node.kubernetes.io/instance-type": "ct5lp-hightpu-4t",
                "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
                "cloud.google.com/gke-tpu-topology": "2x4",
                "cloud.google.com/gke-nodepool": "tpu-v5e",
            },
            taints=[{"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}],
        ),
    ]
