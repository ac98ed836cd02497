"""GPU fragmentation as Weng et al. (ATC 2023) define it, and as their simulator computes it
(hkust-adsl/kubernetes-scheduler-simulator, `pkg/utils/frag.go`):

- The *typical pods* are the most common pod shapes (CPU, GPU share, GPU count, GPU models)
  of the workload, most common first, until they cover 95 % of its pods (CPU-only pods
  included), with their frequencies renormalised to 1.
- A node's fragmentation for one typical pod: if the pod cannot run on the node (no GPU of an
  accepted model, not enough CPU, or no GPUs with room for its share), every free milli-GPU of
  the node; if it can, the free milli-GPUs of the GPUs whose room is below the pod's share per
  GPU (which that pod could never use). A CPU-only typical pod counts all free milli-GPUs.
- A node's fragmentation is the frequency-weighted sum over the typical pods; the cluster's is
  the sum over nodes.

FGD places a pod where this sum grows least. To score every node for every pod quickly, each
node keeps, per typical pod, how many GPUs have room for it (`room`) and how many milli-GPUs
sit on GPUs too small for it (`stranded`); a placement changes these only on the GPUs it
touches, so the fragmentation after a hypothetical placement is a few array operations.

The measure is `fleet.fragmentation`'s (the controller exports it per pool), vectorised here;
`tests/replay/test_fragmentation_measure.py` holds the two to the same number for every node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fleet.fragmentation import PodShape
from fleet.fragmentation import typical_pods as shared_typical_pods
from replay.pack.cluster import MILLI, Cluster
from replay.trace import PodRequest


@dataclass(frozen=True, kw_only=True)
class TypicalPods:
    """Typical pod shapes as arrays over T shapes."""

    cpu: np.ndarray
    milli: np.ndarray
    num_gpu: np.ndarray
    weight: np.ndarray
    accepts: np.ndarray
    """T x models: may the shape run on the model."""

    @property
    def gpu(self) -> np.ndarray:
        """Which shapes ask for GPUs."""
        return self.milli > 0


def typical_pods(pods: Sequence[PodRequest], models: Sequence[str]) -> TypicalPods:
    """The workload's typical pods (`fleet.fragmentation.typical_pods`: the simulator's
    choice, most common first, equal counts larger shape first) as arrays."""
    chosen = shared_typical_pods(
        PodShape(num_gpu=p.num_gpu, gpu_milli=p.gpu_milli, cpu_milli=p.cpu_milli, models=p.gpu_spec)
        for p in pods
    )
    weight = np.array([t.weight for t in chosen], dtype=float)
    return TypicalPods(
        cpu=np.array([t.shape.cpu_milli for t in chosen], dtype=np.int64),
        milli=np.array([t.shape.gpu_milli for t in chosen], dtype=np.int64),
        num_gpu=np.array([t.shape.num_gpu for t in chosen], dtype=np.int64),
        weight=weight / weight.sum(),
        accepts=np.array(
            [[not t.shape.models or m in t.shape.models for m in models] for t in chosen],
            dtype=bool,
        ),
    )


class Fragmentation:
    """Each node's fragmentation, kept up to date as pods are placed."""

    def __init__(self, cluster: Cluster, typical: TypicalPods) -> None:
        self.cluster = cluster
        self.typical = typical
        n, t = len(cluster.names), len(typical.weight)
        self.room = np.zeros((n, t), dtype=np.int64)
        self.stranded = np.zeros((n, t), dtype=np.int64)
        self.node = np.zeros(n, dtype=float)
        self.accepts = typical.accepts[:, cluster.model].T  # n x T
        for i in range(n):
            self.update(i)

    def update(self, node: int) -> None:
        """Recompute one node's counts after a placement on it."""
        left = self.cluster.gpu_left[node]
        milli = self.typical.milli[:, None]
        fits = left[None, :] >= milli
        self.room[node] = fits.sum(axis=1)
        self.stranded[node] = (left[None, :] * ~fits).sum(axis=1)
        self.node[node] = float(
            self.amount(
                self.room[node : node + 1],
                self.stranded[node : node + 1],
                self.cluster.left_total[node : node + 1],
                self.cluster.cpu_left[node : node + 1],
                self.accepts[node : node + 1],
            )[0]
        )

    def amount(
        self,
        room: np.ndarray,
        stranded: np.ndarray,
        left_total: np.ndarray,
        cpu_left: np.ndarray,
        accepts: np.ndarray,
    ) -> np.ndarray:
        """Fragmentation (milli-GPUs) of K node states given their per-shape counts (K x T)."""
        t = self.typical
        runs = accepts & (cpu_left[:, None] >= t.cpu[None, :]) & (room >= t.num_gpu[None, :])
        runs &= t.gpu[None, :]
        per_shape = np.where(runs, stranded, left_total[:, None])
        return per_shape @ t.weight

    def total(self) -> float:
        return float(self.node.sum())

    def after_whole(self, nodes: np.ndarray, num_gpu: int, cpu: int) -> np.ndarray:
        """Fragmentation of each of `nodes` after taking `num_gpu` wholly free GPUs: each
        shape loses that many GPUs with room; no GPU becomes too small."""
        c = self.cluster
        return self.amount(
            self.room[nodes] - num_gpu,
            self.stranded[nodes],
            c.left_total[nodes] - num_gpu * MILLI,
            c.cpu_left[nodes] - cpu,
            self.accepts[nodes],
        )

    def after_share(
        self, nodes: np.ndarray, gpu_left: np.ndarray, milli: int, cpu: int
    ) -> np.ndarray:
        """Fragmentation of node `nodes[k]` after a share of `milli` goes to a GPU with
        `gpu_left[k]` free: only that GPU's standing changes."""
        c = self.cluster
        shape_milli = self.typical.milli[None, :]
        before = gpu_left[:, None]
        after = before - milli
        room = self.room[nodes] - (before >= shape_milli) + (after >= shape_milli)
        stranded = (
            self.stranded[nodes] - before * (before < shape_milli) + after * (after < shape_milli)
        )
        return self.amount(
            room,
            stranded,
            c.left_total[nodes] - milli,
            c.cpu_left[nodes] - cpu,
            self.accepts[nodes],
        )
