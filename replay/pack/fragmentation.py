"""GPU fragmentation as Weng et al. (ATC 2023) define it, and as their simulator computes it
(hkust-adsl/kubernetes-scheduler-simulator, `pkg/utils/frag.go`), kept up to date over the
whole node list as pack mode places pods one after another.

The definition is the product's: the typical pods are `fleet.fragmentation`'s selection and
the arithmetic (a node's fragmentation, and after a hypothetical placement of whole GPUs or a
share) is `placement.fgd`'s, which the placement service scores Volcano's candidate nodes with.
What this module adds is the bookkeeping of a replay: each node keeps, per typical pod, how many
GPUs have room for it (`room`) and how many milli-GPUs sit on GPUs too small for it
(`stranded`), recomputed only for the node a placement touches, so that scoring every node for
every pod is a few array operations.

`tests/replay/test_fragmentation_measure.py` holds this to `fleet.fragmentation`'s per-node
measure (the one the controller exports per pool) for every node.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from placement import fgd
from placement.fgd import TypicalPods
from replay.pack.cluster import Cluster
from replay.trace import PodRequest

__all__ = ["Fragmentation", "TypicalPods", "typical_pods"]


def typical_pods(pods: Sequence[PodRequest]) -> TypicalPods:
    """The workload's typical pods (each pod counted once), as the placement service's arrays."""
    return fgd.typical_pods(
        (fgd.Shape(p.cpu_milli, p.gpu_milli, p.num_gpu, p.gpu_spec), 1) for p in pods
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
        self.accepts = typical.accepts(cluster.models)[:, cluster.model].T  # n x T
        for i in range(n):
            self.update(i)

    def update(self, node: int) -> None:
        """Recompute one node's counts after a placement on it."""
        room, stranded = fgd.counts_per_shape(self.typical, self.cluster.gpu_left[node : node + 1])
        self.room[node] = room[0]
        self.stranded[node] = stranded[0]
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
        return fgd.fragmentation(
            self.typical,
            room=room,
            stranded=stranded,
            left_total=left_total,
            cpu_left=cpu_left,
            accepts=accepts,
        )

    def total(self) -> float:
        return float(self.node.sum())

    def after_whole(self, nodes: np.ndarray, num_gpu: int, cpu: int) -> np.ndarray:
        """Fragmentation of each of `nodes` after taking `num_gpu` wholly free GPUs (or none)
        and `cpu`."""
        c = self.cluster
        return fgd.after_whole(
            self.typical,
            room=self.room[nodes],
            stranded=self.stranded[nodes],
            left_total=c.left_total[nodes],
            cpu_left=c.cpu_left[nodes],
            accepts=self.accepts[nodes],
            num_gpu=num_gpu,
            cpu_milli=cpu,
        )

    def after_share(
        self, nodes: np.ndarray, gpu_left: np.ndarray, milli: int, cpu: int
    ) -> np.ndarray:
        """Fragmentation of node `nodes[k]` after a share of `milli` goes to a GPU with
        `gpu_left[k]` free."""
        c = self.cluster
        return fgd.after_share(
            self.typical,
            room=self.room[nodes],
            stranded=self.stranded[nodes],
            left_total=c.left_total[nodes],
            cpu_left=c.cpu_left[nodes],
            accepts=self.accepts[nodes],
            gpu_left=gpu_left,
            milli=milli,
            cpu_milli=cpu,
        )
