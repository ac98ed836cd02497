"""GPU fragmentation as Weng et al. define it ("Beware of Fragmentation", USENIX ATC 2023), over
one node's free resources, in plain Python: the measure the controller exports per pool each
pass (controller/concerns/fragmentation.py) and the one the replay's pack mode computes for
every node at once (replay/pack/fragmentation.py, which a test holds to this one).

- The *typical pods* are the workload's most common pod shapes, most common first, until they
  cover 95 % of its pods, their frequencies renormalised to 1 (`typical_pods`).
- A node's fragmentation for one typical pod: every free milli-GPU of the node if the pod
  cannot run there (a model it does not accept, not enough CPU, no GPU with room for its
  share, too few wholly free GPUs); if it can, the free milli-GPUs of the GPUs whose room is
  below the pod's share per GPU, which that pod could never use. A typical pod without GPUs
  counts every free milli-GPU.
- A node's fragmentation is the frequency-weighted sum over the typical pods
  (`node_fragmentation`, milli-GPUs); a pool's or a cluster's is the sum over its nodes.

`reserved_cpu_per_idle_gpu` is the CPU a pod without GPUs should leave per idle GPU of a node,
derived from the node's own shape (docs/replay.md, "A reservation per node shape"): the replay
measures it, and a placement that sees each node (a scheduler extender's predicate) can
enforce it; Volcano's own predicate takes one ratio for every node.

What is not observed is not counted: a node whose free CPU is unknown (`cpu_left=None`) lets
every typical pod's CPU fit, so only the GPUs' own fragmentation is measured there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MILLI = 1000
"""Milli-GPUs in one GPU."""
POPULARITY = 0.95
"""Share of the workload's pods the typical pods cover (the paper's experiments)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PodShape:
    """What one pod asks for. gpu_milli: per GPU (1000 for whole GPUs, less for a share of one
    GPU, 0 without GPUs); models: the GPU models it accepts (empty: any)."""

    num_gpu: int
    gpu_milli: int = MILLI
    cpu_milli: int = 0
    models: tuple[str, ...] = ()

    @property
    def asks_gpus(self) -> bool:
        return self.num_gpu > 0 and self.gpu_milli > 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TypicalPod:
    shape: PodShape
    weight: float
    """Its frequency among the typical pods (they sum to 1)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeRoom:
    """What a node has free: milli-GPUs on each of its GPUs, CPU (None: not observed), and its
    GPU model."""

    gpu_left: tuple[int, ...]
    cpu_left: int | None = None
    model: str = ""

    @property
    def free_milli(self) -> int:
        return sum(self.gpu_left)


def typical_pods(shapes: Iterable[PodShape], popularity: float = POPULARITY) -> list[TypicalPod]:
    """The most common shapes, most common first (equal counts: larger shape first, as the
    authors' simulator sorts), until they cover `popularity` of the pods."""
    return typical_of_counts(((s, 1) for s in shapes), popularity)


def typical_of_counts(
    shape_counts: Iterable[tuple[PodShape, float]], popularity: float = POPULARITY
) -> list[TypicalPod]:
    """`typical_pods` of a workload given as (shape, how many pods) pairs: counts may be
    weights (the placement service weighs its seed as so many pods)."""
    counts: dict[PodShape, float] = {}
    for s, count in shape_counts:
        if count <= 0:
            continue
        shape = PodShape(
            num_gpu=s.num_gpu,
            gpu_milli=s.gpu_milli if s.num_gpu else 0,
            cpu_milli=s.cpu_milli,
            models=s.models,
        )
        counts[shape] = counts.get(shape, 0) + count
    ranked = sorted(
        counts.items(),
        key=lambda kv: (
            kv[1],
            kv[0].cpu_milli,
            kv[0].gpu_milli,
            kv[0].num_gpu,
            "|".join(kv[0].models),
        ),
        reverse=True,
    )
    total = sum(counts.values())
    chosen: list[tuple[PodShape, float]] = []
    covered: float = 0
    for shape, count in ranked:
        if covered >= popularity * total:
            break
        chosen.append((shape, count))
        covered += count
    weight_sum = sum(c for _, c in chosen)
    return [TypicalPod(shape=s, weight=c / weight_sum) for s, c in chosen]


def fragmentation_for(node: NodeRoom, pod: PodShape) -> int:
    """The node's fragmentation for one pod shape, in milli-GPUs."""
    free = node.free_milli
    if not pod.asks_gpus:
        return free
    if pod.models and node.model not in pod.models:
        return free
    if node.cpu_left is not None and node.cpu_left < pod.cpu_milli:
        return free
    room = sum(1 for left in node.gpu_left if left >= pod.gpu_milli)
    if room < pod.num_gpu:
        return free
    return sum(left for left in node.gpu_left if left < pod.gpu_milli)


def node_fragmentation(node: NodeRoom, typical: Sequence[TypicalPod]) -> float:
    """The node's fragmentation for the workload: milli-GPUs, frequency-weighted."""
    return sum(t.weight * fragmentation_for(node, t.shape) for t in typical)


def fragmented_gpus(nodes: Iterable[NodeRoom], typical: Sequence[TypicalPod]) -> float:
    """The nodes' fragmentation in GPUs: free GPUs the typical workload cannot use."""
    return sum(node_fragmentation(n, typical) for n in nodes) / MILLI


RESERVE_SHARE_OF_NODE = 0.9
"""Of a node's cores per GPU, the share kept per idle GPU: a tenth of every node's CPU stays
open to pods without GPUs even when all its GPUs are idle, so no shape locks them out."""
RESERVE_CAP_MILLI = 12_000
"""At most 12 cores per idle GPU: the trace's GPU pods ask for a median 11.4 cores per GPU, so a
node with many cores per GPU (the trace's T4 nodes: 52) keeps what GPU pods use, not all."""


def reserved_cpu_per_idle_gpu(
    cpu_milli: int,
    gpus: int,
    *,
    share: float = RESERVE_SHARE_OF_NODE,
    cap_milli: int = RESERVE_CAP_MILLI,
) -> int:
    """Milli-cores a pod without GPUs must leave idle per idle GPU of a node with `cpu_milli`
    and `gpus`: `share` of the node's own cores per GPU, at most `cap_milli`; 0 for a node
    without GPUs."""
    if gpus <= 0 or cpu_milli <= 0:
        return 0
    return min(cap_milli, int(share * cpu_milli / gpus))
