"""The packing experiment's cluster: every node's free CPU, memory and per-GPU share, as numpy
arrays so that a policy scores all nodes at once.

A GPU is 1000 milli-GPUs. A pod asks for CPU (milli-cores), memory (MiB) and either nothing,
one share of one GPU (`gpu_milli` < 1000), or `num_gpu` whole GPUs. It fits a node when the CPU
and memory fit, its `gpu_spec` (if any) names the node's model, and one GPU has room for its
share, or enough GPUs are wholly free. Whole GPUs are taken lowest index first (the
simulator's `AllocateExclusiveGpuId`, and kubelet's device order); which GPU a share goes to
is the policy's choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from replay.trace import PodRequest, TraceNode

MILLI = 1000
MAX_GPUS_PER_NODE = 8


@dataclass(frozen=True, kw_only=True)
class Demand:
    """One pod's request in the arrays' units, with the models it accepts as a mask."""

    cpu: int
    memory: int
    num_gpu: int
    milli: int
    """Per GPU (0 without GPUs)."""
    accepts: np.ndarray | None
    """Per model index: may the pod run on it; None for any model."""

    @property
    def shared(self) -> bool:
        return self.num_gpu == 1 and 0 < self.milli < MILLI

    @property
    def gpu_milli_total(self) -> int:
        return self.num_gpu * self.milli


class Cluster:
    """Free resources of every node; `place` takes a pod's share of one node."""

    def __init__(self, nodes: Sequence[TraceNode]) -> None:
        if not nodes:
            raise ValueError("the node list has no GPU nodes")
        # In name order: ties between nodes go to the first name, the lowest index.
        nodes = sorted(nodes, key=lambda n: n.name)
        self.names = [n.name for n in nodes]
        self.models = tuple(sorted({n.model for n in nodes}))
        index = {m: i for i, m in enumerate(self.models)}
        self.model = np.array([index[n.model] for n in nodes], dtype=np.int64)
        self.gpus = np.array([min(n.gpus, MAX_GPUS_PER_NODE) for n in nodes], dtype=np.int64)
        self.cpu_capacity = np.array([n.cpu_milli for n in nodes], dtype=np.int64)
        self.memory_capacity = np.array([n.memory_mib for n in nodes], dtype=np.int64)
        columns = np.arange(MAX_GPUS_PER_NODE)
        self.gpu_left = np.where(columns[None, :] < self.gpus[:, None], MILLI, 0).astype(np.int64)
        """Milli-GPUs free on each GPU; GPUs a node does not have are 0."""
        self.cpu_left = self.cpu_capacity.copy()
        self.memory_left = self.memory_capacity.copy()
        self.capacity_milli = int(self.gpus.sum()) * MILLI
        self.allocated_milli = 0
        self.free_gpus = (self.gpu_left == MILLI).sum(axis=1)
        self.max_left = self.gpu_left.max(axis=1)
        self.left_total = self.gpu_left.sum(axis=1)
        self._states: dict[tuple[int, ...], int] = {}
        self.state = np.array([self._state_of(i) for i in range(len(nodes))], dtype=np.int64)
        """Nodes with the same state id have the same model, capacity and free resources
        (GPU shares as a multiset), so every policy scores them alike."""

    def _state_of(self, node: int) -> int:
        key = (
            int(self.model[node]),
            int(self.gpus[node]),
            int(self.cpu_capacity[node]),
            int(self.memory_capacity[node]),
            int(self.cpu_left[node]),
            int(self.memory_left[node]),
            *sorted(int(v) for v in self.gpu_left[node]),
        )
        return self._states.setdefault(key, len(self._states))

    def distinct(self, nodes: np.ndarray) -> np.ndarray:
        """The first node (by name) of each state among `nodes` (ascending indices): a
        policy that scores by state and takes the first of equals picks among these only."""
        _, first = np.unique(self.state[nodes], return_index=True)
        return nodes[np.sort(first)]

    def demand(self, pod: PodRequest) -> Demand:
        accepts = None
        if pod.gpu_spec:
            accepts = np.array([m in pod.gpu_spec for m in self.models], dtype=bool)
        return Demand(
            cpu=pod.cpu_milli,
            memory=pod.memory_mib,
            num_gpu=pod.num_gpu,
            milli=pod.gpu_milli if pod.num_gpu > 0 else 0,
            accepts=accepts,
        )

    def fitting(self, d: Demand) -> np.ndarray:
        """Indices of the nodes the pod fits on now."""
        ok = (self.cpu_left >= d.cpu) & (self.memory_left >= d.memory)
        if d.num_gpu > 0:
            if d.accepts is not None:
                ok &= d.accepts[self.model]
            if d.shared:
                ok &= self.max_left >= d.milli
            else:
                ok &= self.free_gpus >= d.num_gpu
        return np.flatnonzero(ok)

    def whole_gpus(self, node: int, count: int) -> np.ndarray:
        """The lowest-index wholly free GPUs of a node."""
        return np.flatnonzero(self.gpu_left[node] == MILLI)[:count]

    def place(self, node: int, d: Demand, gpus: np.ndarray) -> None:
        """Take the pod's CPU, memory and GPU share (from `gpus`) of the node."""
        self.cpu_left[node] -= d.cpu
        self.memory_left[node] -= d.memory
        if d.num_gpu > 0:
            self.gpu_left[node, gpus] -= d.milli
            row = self.gpu_left[node]
            self.free_gpus[node] = int((row == MILLI).sum())
            self.max_left[node] = int(row.max())
            self.left_total[node] = int(row.sum())
            self.allocated_milli += d.gpu_milli_total
        self.state[node] = self._state_of(node)
