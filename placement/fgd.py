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

This module is the one definition: the placement service scores Volcano's candidate nodes with
it, and the replay's pack mode measures and places with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

MILLI = 1000
"""Milli-GPUs in one GPU."""
POPULARITY = 0.95
"""Share of the workload's pods the typical pods cover (the simulator's experiments:
`--pod-popularity-threshold 95`)."""


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
    """The typical pods of a workload given as (shape, how many pods) pairs."""
    merged: dict[Shape, float] = {}
    for shape, count in counts:
        if count > 0:
            merged[shape] = merged.get(shape, 0.0) + count
    if not merged:
        raise ValueError("a workload without pods has no typical pods")
    # Most common first; equal counts larger shape first (the simulator sorts its list in
    # reverse of (count, cpu, milli, count of GPUs, models)).
    ranked = sorted(merged.items(), key=lambda kv: (kv[1], kv[0].key()))[::-1]
    total = sum(merged.values())
    chosen: list[tuple[Shape, float]] = []
    covered = 0.0
    for shape, count in ranked:
        if covered >= POPULARITY * total:
            break
        chosen.append((shape, count))
        covered += count
    weight = np.array([c for _, c in chosen], dtype=float)
    return TypicalPods(
        cpu=np.array([s.cpu_milli for s, _ in chosen], dtype=np.int64),
        milli=np.array([s.gpu_milli if s.num_gpu else 0 for s, _ in chosen], dtype=np.int64),
        num_gpu=np.array([s.num_gpu for s, _ in chosen], dtype=np.int64),
        weight=weight / weight.sum(),
        specs=tuple(s.gpu_spec for s, _ in chosen),
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
    cpu_after = nodes.cpu_left - demand.cpu_milli
    gpu_pick = np.full(n, -1, dtype=np.int64)
    if not demand.shared:
        # Whole GPUs (or none): each shape loses that many GPUs with room, none becomes too
        # small.
        after = fragmentation(
            typical,
            room=room - demand.num_gpu,
            stranded=stranded,
            left_total=left_total - demand.num_gpu * MILLI,
            cpu_left=cpu_after,
            accepts=nodes.accepts,
        )
        out = sigmoid_score(before - after)
        if demand.num_gpu:
            out = np.where((nodes.gpu_left == MILLI).sum(axis=1) >= demand.num_gpu, out, -1)
        return out, gpu_pick
    # A share: every GPU with room is a candidate; only its own standing changes.
    width = nodes.gpu_left.shape[1]
    shape_milli = typical.milli[None, None, :]
    left = nodes.gpu_left[:, :, None]
    fits_before = left >= shape_milli
    after_left = left - demand.gpu_milli
    fits_after = after_left >= shape_milli
    room_after = room[:, None, :] - fits_before + fits_after
    stranded_after = (
        stranded[:, None, :] - left * ~fits_before + after_left * ~fits_after
    )  # N x G x T
    after = fragmentation(
        typical,
        room=room_after.reshape(n * width, -1),
        stranded=stranded_after.reshape(n * width, -1),
        left_total=np.repeat(left_total - demand.gpu_milli, width),
        cpu_left=np.repeat(cpu_after, width),
        accepts=np.repeat(nodes.accepts, width, axis=0),
    ).reshape(n, width)
    pair = sigmoid_score(before[:, None] - after)
    pair = np.where(nodes.gpu_left >= demand.gpu_milli, pair, -1)
    best = pair.max(axis=1) if width else np.full(n, -1, dtype=np.int64)
    if width:
        gpu_pick = np.where(best >= 0, np.argmax(pair == best[:, None], axis=1), -1)
    return best, gpu_pick
