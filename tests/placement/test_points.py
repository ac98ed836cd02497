"""What the service answers Volcano: FGD's order, its integer ties broken by best fit (they
went to Volcano's random pick before), each rank worth more than Volcano's own scores."""

from __future__ import annotations

import numpy as np

from fleet.placement import SCORE_SCALE
from placement import fgd
from placement.points import volcano_points

WHOLE = 1000


def typical(*shapes: tuple[int, int, float]) -> fgd.TypicalPods:
    """Typical pods of one whole GPU each: (CPU milli-cores, GPUs, weight)."""
    return fgd.TypicalPods(
        cpu=np.array([s[0] for s in shapes], dtype=np.int64),
        milli=np.full(len(shapes), WHOLE, dtype=np.int64),
        num_gpu=np.array([s[1] for s in shapes], dtype=np.int64),
        weight=np.array([s[2] for s in shapes], dtype=float),
        specs=tuple(() for _ in shapes),
    )


def nodes(*rows: tuple[int, int]) -> fgd.Nodes:
    """Nodes of 8 GPUs: (idle GPUs, idle CPU milli-cores)."""
    return fgd.Nodes(
        gpu_left=np.array([[WHOLE] * g + [0] * (8 - g) for g, _ in rows], dtype=np.int64),
        cpu_left=np.array([c for _, c in rows], dtype=np.int64),
        accepts=np.ones((len(rows), 1), dtype=bool),
    )


def test_fgds_integer_ties_go_to_the_best_fit_and_fgd_outranks_best_fit() -> None:
    """A CPU-only pod of 8 cores. `tight` (1 idle GPU, 20 cores) leaves too little CPU for a
    typical pod of 16 cores (weight 1 %): fragmentation grows by 10 milli-GPUs; `roomy` (3 idle
    GPUs, 30 cores) leaves too little for one of 24 cores (weight 0.1 %): it grows by 3. FGD's
    integer score ties them (49 and 49; the old answer: equal points, Volcano's random pick);
    best fit prefers `tight`, which keeps fewer GPUs free. `spare` (8 idle GPUs, 64 cores)
    keeps room for every typical pod: FGD's 50 outranks best fit."""
    pods = fgd.TypicalPods(
        cpu=np.array([4000, 16000, 24000], dtype=np.int64),
        milli=np.full(3, WHOLE, dtype=np.int64),
        num_gpu=np.ones(3, dtype=np.int64),
        weight=np.array([0.989, 0.01, 0.001]),
        specs=((), (), ()),
    )
    candidates = fgd.Nodes(
        gpu_left=np.array([[WHOLE] + [0] * 7, [WHOLE] * 3 + [0] * 5, [WHOLE] * 8], dtype=np.int64),
        cpu_left=np.array([20000, 30000, 64000], dtype=np.int64),
        accepts=np.ones((3, 3), dtype=bool),
    )
    pod = fgd.Demand(cpu_milli=8000, num_gpu=0, gpu_milli=0)
    scores, _ = fgd.scores(pods, candidates, pod)
    assert scores.tolist() == [49, 49, 50]
    tight, roomy, spare = volcano_points(scores, candidates, pod)
    assert tight - roomy >= SCORE_SCALE
    assert spare - tight >= SCORE_SCALE


def test_best_fit_breaks_fgds_exact_ties_and_nodes_alike_stay_tied() -> None:
    """A one-GPU pod where every node keeps room for the one typical pod: FGD's reduction is 0
    everywhere; the node left with fewer free GPUs ranks first, nodes alike rank alike, and a
    node without a free GPU scores 0."""
    pods = typical((4000, 1, 1.0))
    candidates = nodes((2, 32000), (4, 32000), (2, 32000), (0, 32000))
    pod = fgd.Demand(cpu_milli=4000, num_gpu=1, gpu_milli=WHOLE)
    scores, _ = fgd.scores(pods, candidates, pod)
    assert scores.tolist() == [50, 50, 50, -1]
    points = volcano_points(scores, candidates, pod)
    assert points.tolist() == [2 * SCORE_SCALE, SCORE_SCALE, 2 * SCORE_SCALE, 0.0]


def test_every_rank_step_outweighs_volcanos_own_scores() -> None:
    """Ranks, not FGD's score times a scale: one step of FGD's order or of best fit is worth a
    full `SCORE_SCALE` in Volcano's sum, more than binpack and nodeorder add (at most about
    1,500 as shipped)."""
    score = np.array([50, 51, 50, 80, -1])
    candidates = nodes((1, 8000), (1, 8000), (2, 8000), (1, 8000), (1, 8000))
    pod = fgd.Demand(cpu_milli=1000, num_gpu=0, gpu_milli=0)
    points = volcano_points(score, candidates, pod)
    assert points.tolist() == [2 * SCORE_SCALE, 3 * SCORE_SCALE, SCORE_SCALE, 4 * SCORE_SCALE, 0.0]
    assert SCORE_SCALE > 1_500
