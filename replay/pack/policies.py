"""Where each placement policy puts a pod, given the nodes it fits on. Scores follow the
simulator of Weng et al. (hkust-adsl/kubernetes-scheduler-simulator, `pkg/simulator/plugin`)
as its experiments configure them, integer rounding included, since that decides ties; ties
between nodes go to the node whose name sorts first, as the simulator's `selectHost` does
("for reproducibility", instead of Kubernetes' random pick; with the trace's node names that
is the node listed first, which itself packs).

- random: any node the pod fits on; a share goes to a random GPU with room.
- best-fit: the node left with the least free CPU and GPU, each normalised by the largest
  node (128 cores, 8 GPUs) and weighted equally; a share goes to the fullest GPU with room.
- dot-product (Tetris, as the simulator's "merge, max" variant): the node whose free
  (CPU, GPU) vector has the smallest dot product with the pod's request, both normalised by
  the largest node; shares best-fit.
- gpu-packing: a share onto a GPU already shared (fullest first), else onto a used node,
  else onto an idle node (the one with fewest GPUs first); shares best-fit.
- fgd: the node (and GPU) where the cluster's fragmentation grows least
  (`fragmentation.Fragmentation`), scored as the simulator does:
  floor(100 x sigmoid((before - after) / 1000)).
- volcano: the placement of fleetplane's Volcano configuration (`volcano.VolcanoScoring`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from placement.fgd import sigmoid_score
from replay.pack.cluster import MILLI, Cluster, Demand
from replay.pack.fragmentation import Fragmentation

MAX_SPEC_CPU = 128000
"""The simulator's normalisation: the largest node's CPU (milli-cores)..."""
MAX_SPEC_GPU = 8000
"""...and GPUs (milli-GPUs)."""


@dataclass(frozen=True, kw_only=True)
class Context:
    cluster: Cluster
    rng: np.random.Generator
    fragmentation: Fragmentation | None = None
    """Needed by `fgd` only."""


Choice = tuple[int, np.ndarray]
"""The node, and the GPUs (indices) the pod takes on it."""
Policy = Callable[[Context, Demand, np.ndarray], Choice]


def best_of(nodes: np.ndarray, scores: np.ndarray) -> int:
    """The node with the highest score, the first by name among equals."""
    return int(nodes[np.argmax(scores)])  # the first maximum: nodes are in name order


def gpus_for(ctx: Context, node: int, d: Demand, pick_share: str = "best") -> np.ndarray:
    """The GPUs a pod takes on its node: whole GPUs lowest index first; a share on the GPU
    with the least room that holds it (`best`), the first that holds it (`first`), or a
    random one (`random`)."""
    c = ctx.cluster
    if d.num_gpu == 0:
        return np.empty(0, dtype=np.int64)
    if not d.shared:
        return c.whole_gpus(node, d.num_gpu)
    left = c.gpu_left[node]
    holds = np.flatnonzero(left >= d.milli)
    if pick_share == "random":
        return holds[ctx.rng.integers(len(holds)) :][:1]
    if pick_share == "first":
        return holds[:1]
    return holds[np.argmin(left[holds])][None]


def random_fit(ctx: Context, d: Demand, nodes: np.ndarray) -> Choice:
    node = int(nodes[ctx.rng.integers(len(nodes))])
    return node, gpus_for(ctx, node, d, "random")


def best_fit(ctx: Context, d: Demand, nodes: np.ndarray) -> Choice:
    c = ctx.cluster
    waste = (
        0.5 * (c.cpu_left[nodes] - d.cpu) / MAX_SPEC_CPU
        + 0.5 * (c.left_total[nodes] - d.gpu_milli_total) / MAX_SPEC_GPU
    )
    scores = ((1.0 - waste) * 100).astype(np.int64)
    node = best_of(nodes, scores)
    return node, gpus_for(ctx, node, d)


def dot_product(ctx: Context, d: Demand, nodes: np.ndarray) -> Choice:
    c = ctx.cluster
    dot = (c.cpu_left[nodes] / MAX_SPEC_CPU) * (d.cpu / MAX_SPEC_CPU) + (
        c.left_total[nodes] / MAX_SPEC_GPU
    ) * (d.gpu_milli_total / MAX_SPEC_GPU)
    scores = (100 * (1.0 - dot / 2)).astype(np.int64)
    node = best_of(nodes, scores)
    return node, gpus_for(ctx, node, d)


def gpu_packing(ctx: Context, d: Demand, nodes: np.ndarray) -> Choice:
    c = ctx.cluster
    if d.num_gpu == 0:
        scores = np.zeros(len(nodes), dtype=np.int64)
    else:
        free = c.free_gpus[nodes]
        idle = free == c.gpus[nodes]
        scores = np.where(idle, np.maximum(33 - free, free), 0)
        if d.shared:
            left = c.gpu_left[nodes]
            # The fullest GPU that holds the share; a wholly free one counts as opening a GPU.
            fits = np.where(left >= d.milli, left, MILLI + 1)
            tightest = fits.min(axis=1)
            on_shared = np.maximum(100 - (tightest * 100 // MILLI) // 10, 50)
            scores = np.where(idle, scores, np.where(tightest < MILLI, on_shared, 49))
        else:
            scores = np.where(idle, scores, np.maximum(50 - d.num_gpu, 33))
    node = best_of(nodes, scores)
    return node, gpus_for(ctx, node, d)


def fgd(ctx: Context, d: Demand, nodes: np.ndarray) -> Choice:
    c, frag = ctx.cluster, ctx.fragmentation
    assert frag is not None, "fgd needs the cluster's fragmentation"
    if not d.shared:
        after = frag.after_whole(nodes, d.num_gpu, d.cpu)
        scores = sigmoid_score(frag.node[nodes] - after)
        node = best_of(nodes, scores)
        return node, gpus_for(ctx, node, d)
    # A share: every (node, GPU) pair with room, one per distinct room on a node (GPUs with
    # the same room leave the same fragmentation; the lowest index stands for them).
    left = c.gpu_left[nodes]
    same_before = (left[:, :, None] == left[:, None, :]) & np.tri(left.shape[1], k=-1, dtype=bool)
    candidate = (left >= d.milli) & ~same_before.any(axis=2)
    rows, gpus = np.nonzero(candidate)
    at = nodes[rows]
    after = frag.after_share(at, left[rows, gpus], d.milli, d.cpu)
    pair_scores = sigmoid_score(frag.node[at] - after)
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    node_scores = np.maximum.reduceat(pair_scores, starts)
    node = best_of(at[starts], node_scores)
    mine = at == node
    best = pair_scores[mine].max()
    gpu = int(gpus[mine][pair_scores[mine] == best].min())
    return node, np.array([gpu])


POLICIES: dict[str, Policy] = {
    "random": random_fit,
    "best-fit": best_fit,
    "dot-product": dot_product,
    "gpu-packing": gpu_packing,
    "fgd": fgd,
}
