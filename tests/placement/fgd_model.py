"""The replay's FGD (replay/pack: `Fragmentation`, the pack experiment's measure) as a scoring
policy of `replay.pack.realcheck`, which scores every candidate node of a pod on a cluster
state: what the placement service is held against."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from placement.fgd import sigmoid_score
from replay.pack.cluster import Cluster, Demand
from replay.pack.fragmentation import Fragmentation, TypicalPods, typical_pods
from replay.trace import PodRequest


class FgdModel:
    """FGD's node scores as the pack experiment computes them (integer 0-100), the typical
    pods those of `workload` (the pack experiment's: the whole pod list)."""

    def __init__(self, workload: Sequence[PodRequest]) -> None:
        self.workload = list(workload)
        self._typical: dict[tuple[str, ...], TypicalPods] = {}

    def typical(self, c: Cluster) -> TypicalPods:
        if c.models not in self._typical:
            self._typical[c.models] = typical_pods(self.workload)
        return self._typical[c.models]

    def fitting(self, c: Cluster, d: Demand) -> np.ndarray:
        return c.fitting(d)

    def scores(self, c: Cluster, d: Demand, nodes: np.ndarray) -> np.ndarray:
        frag = Fragmentation(c, self.typical(c))
        if d.shared:
            raise ValueError("the check draws no GPU-sharing pods")
        if d.num_gpu == 0:
            after = frag.amount(
                frag.room[nodes],
                frag.stranded[nodes],
                c.left_total[nodes],
                c.cpu_left[nodes] - d.cpu,
                frag.accepts[nodes],
            )
        else:
            after = frag.after_whole(nodes, d.num_gpu, d.cpu)
        return sigmoid_score(frag.node[nodes] - after).astype(float)
