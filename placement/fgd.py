"""The fragmentation gradient of Weng et al., "Beware of Fragmentation" (USENIX ATC 2023), as
their simulator computes it (hkust-adsl/kubernetes-scheduler-simulator, `pkg/utils/frag.go`),
on arrays of node states so that every candidate node of a pod is scored at once.

- The *typical pods* are the most common pod shapes (CPU, GPU share, GPU count, GPU models) of
  the workload, most common first, until they cover 95 % of its pods (CPU-only pods included),
  with their frequencies renormalised to 1.
- A node's fragmentation for one typical pod: if the pod cannot run there (no GPU of an
  accepted model, not enough CPU, or no GPUs with room for its share), every free milli-GPU of
  the node; if it can, the free milli-GPUs of the GPUs whose room is below the pod's share per
  GPU (which that pod could never use). A CPU-only typical pod counts all free milli-GPUs.
- A node's fragmentation is the frequency-weighted sum over the typical pods (the expected
  fragmentation over the workload); FGD places a pod where it grows least, scored
  floor(100 x sigmoid((before - after) / 1000)).

This module is the one vectorised definition: the placement service scores Volcano's candidate
nodes with it, and the replay's pack mode (replay/pack/fragmentation.py, which keeps each node's
counts between placements) measures and places with it. The typical pods are chosen by
`fleet.fragmentation`, the plain-Python measure the controller exports.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from fleet.fragmentation import MILLI, PodShape, typical_of_counts


@dataclass(frozen=True)
class Shape:
    """A pod's shape as FGD sees it: CPU (milli-cores), milli-GPUs per GPU (0 without GPUs),
    GPU count, and the GPU models it accepts (empty: any)."""

    cpu_milli: int
    gpu_milli: int
    num_gpu: int
    gpu_spec: tuple[str, ...] = ()

    def key(self) -> tuple[int, int, int, str]:
        return (self.cpu_milli, self.gpu_milli, self.num_gpu, "|".join(self.gpu_spec))


@dataclass(frozen=True, kw_only=True)
class TypicalPods:
    """Typical pod shapes as arrays over T shapes."""

    cpu: np.ndarray
    milli: np.ndarray
    num_gpu: np.ndarray
    weight: np.ndarray
    specs: tuple[tuple[str, ...], ...]
    """Per shape, the GPU models it accepts (empty: any)."""

    @property
    def gpu(self) -> np.ndarray:
        """Which shapes ask for GPUs."""
        return self.milli > 0

    def accepts(self, models: Sequence[str]) -> np.ndarray:
        """T x models: may the shape run on the model."""
        return np.array(
            [[not spec or m in spec for m in models] for spec in self.specs], dtype=bool
        ).reshape(len(self.specs), len(models))


def typical_pods(counts: Iterable[tuple[Shape, float]]) -> TypicalPods:
    """The typical pods of a workload given as (shape, how many pods) pairs: the shared
    selection (`fleet.fragmentation.typical_of_counts`, the simulator's ranking) as arrays."""
    chosen = typical_of_counts(
        (
            PodShape(
                num_gpu=s.num_gpu, gpu_milli=s.gpu_milli, cpu_milli=s.cpu_milli, models=s.gpu_spec
            ),
            count,
        )
        for s, count in counts
    )
    if not chosen:
        raise ValueError("a workload without pods has no typical pods")
    weight = np.array([t.weight for t in chosen], dtype=float)
    return TypicalPods(
        cpu=np.array([t.shape.cpu_milli for t in chosen], dtype=np.int64),
        milli=np.array([t.shape.gpu_milli for t in chosen], dtype=np.int64),
        num_gpu=np.array([t.shape.num_gpu for t in chosen], dtype=np.int64),
        weight=weight / weight.sum(),
        specs=tuple(t.shape.models for t in chosen),
    )


def counts_per_shape(typical: TypicalPods, gpu_left: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per node (rows of `gpu_left`, milli-GPUs free per GPU) and typical shape: how many GPUs
    have room for the shape's share (`room`) and how many milli-GPUs sit on GPUs too small for
    it (`stranded`). N x T each."""
    fits = gpu_left[:, None, :] >= typical.milli[None, :, None]
    room = fits.sum(axis=2)
    stranded = (gpu_left[:, None, :] * ~fits).sum(axis=2)
    return room, stranded


def fragmentation(
    typical: TypicalPods,
    *,
    room: np.ndarray,
    stranded: np.ndarray,
    left_total: np.ndarray,
    cpu_left: np.ndarray,
    accepts: np.ndarray,
) -> np.ndarray:
    """Fragmentation (milli-GPUs) of K node states given their per-shape counts (K x T), free
    milli-GPUs and CPU (K), and which shapes each node's model accepts (K x T)."""
    t = typical
    runs = accepts & (cpu_left[:, None] >= t.cpu[None, :]) & (room >= t.num_gpu[None, :])
    runs &= t.gpu[None, :]
    per_shape = np.where(runs, stranded, left_total[:, None])
    return np.asarray(per_shape @ t.weight, dtype=float)


def after_whole(
    typical: TypicalPods,
    *,
    room: np.ndarray,
    stranded: np.ndarray,
    left_total: np.ndarray,
    cpu_left: np.ndarray,
    accepts: np.ndarray,
    num_gpu: int,
    cpu_milli: int,
) -> np.ndarray:
    """Fragmentation of K node states after a pod takes `num_gpu` wholly free GPUs (or none)
    and `cpu_milli`: each shape loses that many GPUs with room; no GPU becomes too small."""
    return fragmentation(
        typical,
        room=room - num_gpu,
        stranded=stranded,
        left_total=left_total - num_gpu * MILLI,
        cpu_left=cpu_left - cpu_milli,
        accepts=accepts,
    )


def after_share(
    typical: TypicalPods,
    *,
    room: np.ndarray,
    stranded: np.ndarray,
    left_total: np.ndarray,
    cpu_left: np.ndarray,
    accepts: np.ndarray,
    gpu_left: np.ndarray,
    milli: int,
    cpu_milli: int,
) -> np.ndarray:
    """Fragmentation of K node states after a share of `milli` goes to a GPU with
    `gpu_left[k]` free (K): only that GPU's standing changes."""
    shape_milli = typical.milli[None, :]
    before = gpu_left[:, None]
    after = before - milli
    return fragmentation(
        typical,
        room=room - (before >= shape_milli) + (after >= shape_milli),
        stranded=stranded - before * (before < shape_milli) + after * (after < shape_milli),
        left_total=left_total - milli,
        cpu_left=cpu_left - cpu_milli,
        accepts=accepts,
    )


def sigmoid_score(reduction: np.ndarray) -> np.ndarray:
    """The simulator's node score for a fragmentation reduction: floor(100 x sigmoid(r/1000))."""
    return np.floor(100.0 / (1.0 + np.exp(-reduction / 1000.0))).astype(np.int64)


@dataclass(frozen=True, kw_only=True)
class Nodes:
    """Candidate nodes' free resources: per-GPU free milli-GPUs (N x G, 0 for GPUs a node does
    not have), free CPU (milli-cores), and which typical shapes each node's model accepts
    (N x T)."""

    gpu_left: np.ndarray
    cpu_left: np.ndarray
    accepts: np.ndarray


@dataclass(frozen=True, kw_only=True)
class Demand:
    cpu_milli: int
    num_gpu: int
    gpu_milli: int
    """Per GPU: 1000 for whole GPUs, less for a share of one GPU, 0 without GPUs."""

    @property
    def shared(self) -> bool:
        return self.num_gpu == 1 and 0 < self.gpu_milli < MILLI


def scores(typical: TypicalPods, nodes: Nodes, demand: Demand) -> tuple[np.ndarray, np.ndarray]:
    """FGD's score of each node for the pod (0-100, higher is better; -1 where the pod's GPUs
    do not fit), and the GPU a share would take there (the lowest index of the best room; -1
    for whole GPUs and pods without GPUs)."""
    n = len(nodes.cpu_left)
    room, stranded = counts_per_shape(typical, nodes.gpu_left)
    left_total = nodes.gpu_left.sum(axis=1)
    before = fragmentation(
        typical,
        room=room,
        stranded=stranded,
        left_total=left_total,
        cpu_left=nodes.cpu_left,
        accepts=nodes.accepts,
    )
    gpu_pick = np.full(n, -1, dtype=np.int64)
    if not demand.shared:
        after = after_whole(
            typical,
            room=room,
            stranded=stranded,
            left_total=left_total,
            cpu_left=nodes.cpu_left,
            accepts=nodes.accepts,
            num_gpu=demand.num_gpu,
            cpu_milli=demand.cpu_milli,
        )
        out = sigmoid_score(before - after)
        if demand.num_gpu:
            out = np.where((nodes.gpu_left == MILLI).sum(axis=1) >= demand.num_gpu, out, -1)
        return out, gpu_pick
    # A share: every GPU with room is a candidate (N x G states, node-major).
    width = nodes.gpu_left.shape[1]
    after = after_share(
        typical,
        room=np.repeat(room, width, axis=0),
        stranded=np.repeat(stranded, width, axis=0),
        left_total=np.repeat(left_total, width),
        cpu_left=np.repeat(nodes.cpu_left, width),
        accepts=np.repeat(nodes.accepts, width, axis=0),
        gpu_left=nodes.gpu_left.reshape(-1),
        milli=demand.gpu_milli,
        cpu_milli=demand.cpu_milli,
    ).reshape(n, width)
    pair = sigmoid_score(before[:, None] - after)
    pair = np.where(nodes.gpu_left >= demand.gpu_milli, pair, -1)
    best = pair.max(axis=1) if width else np.full(n, -1, dtype=np.int64)
    if width:
        gpu_pick = np.where(best >= 0, np.argmax(pair == best[:, None], axis=1), -1)
    return best, gpu_pick
