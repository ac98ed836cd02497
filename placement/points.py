"""What the service answers Volcano for a task: FGD's order of the candidate nodes, its ties
broken by best fit, as points that decide Volcano's sum.

vc-scheduler v1.15's extender plugin (pkg/scheduler/plugins/extender) decodes `nodeScore` as
float64; `BatchNodeOrderFn` adds it to the other plugins' scores (binpack, nodeorder, ...), and
the allocate action takes a node at random among the equal best totals
(`util.SelectBestNodeAndScore`). FGD's score is the simulator's integer
floor(100 x sigmoid(reduction / 1000)) (`fgd.scores`), so many nodes tie; the simulator gives
a tie to the first node by name, which packs (it fills the same nodes first), and with random
ties FGD strands about twice the GPUs (docs/replay.md). The service therefore answers a rank:

1. FGD's integer score: the node where the expected fragmentation grows least ranks first.
   Its fraction is dropped on purpose: measured in pack mode, ranking by it leaves more GPUs
   stranded than the integer score with best fit (docs/replay.md, "FGD served to the
   scheduler"): within a point the gradient says little, and packing says more.
2. Among equal FGD scores, best fit: the node left with fewer free milli-GPUs after the pod,
   which keeps other nodes whole for the pods that need them (what ties by name do).
3. Equal on both: one rank, and Volcano's own scores break the tie, then its random pick.

Each rank step is worth `SCORE_SCALE`, more than all the shipped plugins add, so the order is
the service's wherever it tells nodes apart. A node where the pod's GPUs do not fit (FGD's
score -1) scores 0, below every node where they do.
"""

from __future__ import annotations

import numpy as np

from fleet.placement import SCORE_SCALE
from placement.fgd import Demand, Nodes


def volcano_points(score: np.ndarray, nodes: Nodes, demand: Demand) -> np.ndarray:
    """Per candidate node, `SCORE_SCALE` x its rank (1 for the lowest node where the pod fits,
    0 where it does not: `score` < 0), by FGD's `score` and then best fit."""
    fits = score >= 0
    points = np.zeros(len(score), dtype=float)
    if not fits.any():
        return points
    left_after = nodes.gpu_left.sum(axis=1) - demand.num_gpu * demand.gpu_milli
    keys = np.stack([score[fits].astype(float), -left_after[fits].astype(float)], axis=1)
    _, rank = np.unique(keys, axis=0, return_inverse=True)  # rows sorted lexicographically
    points[fits] = (1.0 + rank.reshape(-1)) * SCORE_SCALE
    return points
