"""What the service answers Volcano for a task: FGD's order of the candidate nodes as points
that decide Volcano's sum, with a best-fit key for FGD's exact ties.

vc-scheduler v1.15's extender plugin (pkg/scheduler/plugins/extender) decodes `nodeScore` as
float64; `BatchNodeOrderFn` adds it to the other plugins' scores (binpack, nodeorder, ...), and
the allocate action takes a node at random among the equal best totals
(`util.SelectBestNodeAndScore`). The simulator's integer score floor(100 x sigmoid) made nodes
whose reductions differ by up to a point tie, and Volcano's random pick among them strands
GPUs (docs/replay.md, "FGD served to the scheduler"). The service therefore answers a rank:

1. FGD's score (`fgd.gradient_score`, with its fraction, compared to `RESOLUTION`): the node
   where the expected fragmentation grows least ranks first;
2. among equal FGD scores, best fit: the node left with fewer free milli-GPUs after the pod
   (it keeps whole nodes free for the pods that need them, as the simulator's ties by node
   name do by always filling the same nodes first);
3. equal on both (nodes in the same state, as far as the pod is concerned): one rank, and
   Volcano's own scores break the tie, then its random pick.

Each rank step is worth `SCORE_SCALE`, more than all the shipped plugins add, so the order is
the service's wherever it tells nodes apart. A node where the pod's GPUs do not fit scores 0,
below every node where they do.
"""

from __future__ import annotations

import numpy as np

from fleet.placement import SCORE_SCALE
from placement.fgd import Demand, Nodes

RESOLUTION = 1e-9
"""FGD scores (0-100) closer than this are equal: far below what a reduction of a thousandth
of a milli-GPU moves the score by (3e-8 at the flattest of the sigmoid), far above the
rounding of the frequency-weighted sums (so nodes in one state never differ by it)."""


def volcano_points(score: np.ndarray, nodes: Nodes, demand: Demand) -> np.ndarray:
    """Per candidate node, `SCORE_SCALE` x its rank (1 for the lowest node where the pod fits,
    0 where it does not: `score` < 0), by FGD's `score` and then best fit."""
    fits = score >= 0
    points = np.zeros(len(score), dtype=float)
    if not fits.any():
        return points
    left_after = nodes.gpu_left.sum(axis=1) - demand.num_gpu * demand.gpu_milli
    keys = np.stack([np.round(score[fits] / RESOLUTION), -left_after[fits].astype(float)], axis=1)
    _, rank = np.unique(keys, axis=0, return_inverse=True)  # rows sorted lexicographically
    points[fits] = (1.0 + rank.reshape(-1)) * SCORE_SCALE
    return points
