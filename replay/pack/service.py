"""`volcano:fgd`: the placement a fleet gets with `volcano.placement: fgd`, as a pack-mode
policy. The shipped scheduler tiers (`replay.pack.volcano`'s model of them, predicates
included) plus Volcano's extender calling the placement service (placement/), as shipped:

- Volcano calls the extender only for a task with more than one candidate node; the service
  learns the task's shape then (its window of recent tasks, `placement.workload`), over the
  shipped seed (the trace's default pod list), not over the list being replayed.
- The service ranks every candidate by FGD's score (`placement.fgd.scores`, 0-100), its ties
  by best fit, each rank worth `SCORE_SCALE` (`placement.points`); Volcano adds its own
  plugins' scores, which then only break the service's remaining ties, and picks at random
  among equal totals.
- A GPU share goes to the GPU the device plugin gives it (lowest index with room), not to the
  GPU FGD scored the node by: the scheduler chooses a node, not a GPU.

What this does not model: the service down or slow (Volcano's own scores alone: the `volcano`
row), and the service's view of shares, which it reads from the pods' annotations (here it
sees every GPU's free share exactly).
"""

from __future__ import annotations

import numpy as np

from placement import fgd
from placement.points import volcano_points
from placement.workload import Workload, read_seed
from replay.pack.cluster import Cluster, Demand
from replay.pack.policies import Choice, Context, gpus_for
from replay.pack.volcano import VolcanoScoring

NAME = "volcano:fgd"


class FgdService(VolcanoScoring):
    """The shipped configuration with `placement: fgd`; one instance per draw (the service's
    workload learns as the draw goes)."""

    def __init__(self, workload: Workload | None = None) -> None:
        super().__init__()
        self.workload = workload or Workload(read_seed())
        self.calls = 0

    def __call__(self, ctx: Context, d: Demand, nodes: np.ndarray) -> Choice:
        c = ctx.cluster
        total = self.scores(c, d, nodes)
        if len(nodes) > 1:
            total = total + self.service_points(c, d, nodes)
        best = nodes[total == total.max()]
        node = int(best[ctx.rng.integers(len(best))]) if len(best) > 1 else int(best[0])
        return node, gpus_for(ctx, node, d, "first")

    def service_points(self, c: Cluster, d: Demand, nodes: np.ndarray) -> np.ndarray:
        """What the service answers for the task on `nodes` (`placement.points`)."""
        self.calls += 1
        spec = () if d.accepts is None else tuple(np.asarray(c.models)[d.accepts].tolist())
        gpu_milli = d.milli if d.num_gpu else 0
        self.workload.observe(
            f"task-{self.calls}",
            fgd.Shape(cpu_milli=d.cpu, gpu_milli=gpu_milli, num_gpu=d.num_gpu, gpu_spec=spec),
        )
        typical = self.workload.typical()
        accepts = typical.accepts(c.models).T  # models x T
        candidates = fgd.Nodes(
            gpu_left=c.gpu_left[nodes], cpu_left=c.cpu_left[nodes], accepts=accepts[c.model[nodes]]
        )
        demand = fgd.Demand(cpu_milli=d.cpu, num_gpu=d.num_gpu, gpu_milli=gpu_milli)
        scores, _ = fgd.scores(typical, candidates, demand)
        return volcano_points(scores, candidates, demand)
