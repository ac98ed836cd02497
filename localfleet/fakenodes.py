"""Fake accelerator nodes for the local stack, managed by KWOK.

A `FakePool` describes a pool of identical nodes as the cloud and the GPU Operator would
present them (capacity, labels, taints); `fake_nodes` turns pools into Node manifests that the
local control plane creates and KWOK keeps Ready. Building nodes is pure; `default_pools` reads
the local stack file, the one place where the local pools are declared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet.config import FleetConfig
from fleet.nodes import node_taints, observed_labels
from fleet.project import stack_file as project_stack_file

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


def default_pools(stack_file: Path | None = None) -> list[FakePool]:
    """The fake pools of the local stack (`stacks/Pulumi.local.yaml`): the one place where the
    local fleet's pools, counts, labels and taints are written."""
    from fleet.config import load_stack_config

    path = stack_file or project_stack_file("local")
    return local_fake_pools(load_stack_config(path))


def local_fake_pools(config: FleetConfig, *, cluster: str | None = None) -> list[FakePool]:
    """The KWOK fake pools of the fleet's local clusters (or of the named one): one fake node
    per `max_nodes`, exposing `allocatable_per_node` units of the pool's resource."""
    return [
        FakePool(
            name=pool.name,
            count=pool.max_nodes,
            resource=pool.resource,
            per_node=pool.allocatable_per_node,
            labels=observed_labels(config, pool),
            taints=node_taints(pool),
        )
        for c in config.clusters
        if c.provider == "local" and (cluster is None or c.name == cluster)
        for pool in c.pools
        # Karpenter's pools start empty: it makes their nodes (localfleet.karpenter).
        if c.autoscaler_for(pool) == "managed"
    ]
