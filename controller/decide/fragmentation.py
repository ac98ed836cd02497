"""GPU fragmentation per pool (Weng et al., ATC 2023; the measure is `fleet.fragmentation`),
decided on the pass's snapshot: for each pool, the free accelerators of its ready, schedulable
nodes that the fleet's typical workload could not use.

The workload is the fleet's own: the accelerator pods of the snapshot (running and pending),
by the accelerators they ask for, their most common shapes covering 95 % of them. With no such
pod, the GPU pods of the Alibaba trace the replay uses (`TRACE_GPU_PODS`) stand in.

What the controller observes is whole units of each accelerator resource (a time-sliced
replica counts as one), not CPU, memory, nor which GPU a pod holds: so the measure counts the
free accelerators of nodes with too few of them for the typical pods (a node with 3 free GPUs
when the typical pods ask for 8), not those stranded by CPU (which the replay's pack mode
measures, docs/replay.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from controller.config import FleetView
from controller.observe.model import Node, Pod
from fleet import labels as keys
from fleet.fragmentation import (
    MILLI,
    NodeRoom,
    PodShape,
    TypicalPod,
    node_fragmentation,
    typical_of_counts,
)

TRACE_GPU_PODS: dict[int, int] = {1: 6989, 8: 44, 2: 16, 4: 15}
"""GPUs asked for -> pods, of the 7,064 GPU pods of the trace's default pod list."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolFragmentation:
    """One pool's accelerators of one resource: allocatable (ready, schedulable nodes), free
    on those, and fragmented (free ones the typical workload cannot use; fractional, the
    typical pods' frequencies weigh them)."""

    pool: str
    resource: str
    model: str
    capacity_type: str
    allocatable: int
    free: int
    fragmented: float

    @property
    def share(self) -> float:
        """Fragmented over allocatable (0 for a pool with none)."""
        return self.fragmented / self.allocatable if self.allocatable else 0.0


def workload(pods: Iterable[Pod], resource: str) -> list[TypicalPod]:
    """The typical pods of the fleet's live pods asking for `resource` (the trace's without).
    Counted by device count first (a pod's shape here is its count alone): one shape per count,
    not one per pod, is what `typical_of_counts` ranks, the same ranking as one per pod."""
    counts: dict[int, int] = {}
    for pod in pods:
        n = pod.demand.get(resource, 0)
        if n > 0 and not pod.terminal and not pod.deleting:
            counts[n] = counts.get(n, 0) + 1
    if not counts:
        counts = dict(TRACE_GPU_PODS)
    return typical_of_counts((PodShape(num_gpu=n), count) for n, count in counts.items())


def plan_fragmentation(
    pods: list[Pod], nodes: dict[str, Node], fleet: FleetView
) -> list[PoolFragmentation]:
    """Each pool's fragmentation, by pool, resource, model and capacity type."""
    in_use: dict[tuple[str, str], int] = {}
    for pod in pods:
        if pod.node_name is None or pod.started is None or pod.terminal:
            continue
        for resource, devices in pod.demand.items():
            held = (pod.node_name, resource)
            in_use[held] = in_use.get(held, 0) + devices
    typical: dict[str, list[TypicalPod]] = {}
    by_free: dict[tuple[str, int], float] = {}
    found: dict[tuple[str, str, str, str], list[int]] = {}
    fragmented: dict[tuple[str, str, str, str], float] = {}
    for node in nodes.values():
        if not node.ready or node.unschedulable:
            continue
        known = fleet.model_of_node(node.labels)
        for resource, count in node.accelerators.items():
            key = (
                node.labels.get(keys.POOL, ""),
                resource,
                known.name if known else "",
                node.capacity_type,
            )
            free = max(0, count - in_use.get((node.name, resource), 0))
            if resource not in typical:
                typical[resource] = workload(pods, resource)
            # A node's fragmentation depends on its free devices alone: worked out once per
            # count (0-8 on most fleets), not once per node.
            share = by_free.get((resource, free))
            if share is None:
                room = NodeRoom(gpu_left=(MILLI,) * free)
                share = by_free[(resource, free)] = (
                    node_fragmentation(room, typical[resource]) / MILLI
                )
            totals = found.setdefault(key, [0, 0])
            totals[0] += count
            totals[1] += free
            fragmented[key] = fragmented.get(key, 0.0) + share
    return [
        PoolFragmentation(
            pool=pool,
            resource=resource,
            model=model,
            capacity_type=capacity,
            allocatable=totals[0],
            free=totals[1],
            fragmented=round(fragmented[(pool, resource, model, capacity)], 3),
        )
        for (pool, resource, model, capacity), totals in sorted(found.items())
    ]
