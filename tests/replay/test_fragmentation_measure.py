"""Pack mode's vectorised fragmentation (replay/pack/fragmentation.py) is the measure the
controller exports (fleet/fragmentation.py): the same number for every node of a cluster the
shipped placement has filled part way with trace pods."""

from __future__ import annotations

import numpy as np
import pytest

from fleet.fragmentation import NodeRoom, PodShape, node_fragmentation, typical_pods
from replay.pack.cluster import Cluster
from replay.pack.fragmentation import Fragmentation
from replay.pack.fragmentation import typical_pods as pack_typical_pods
from replay.pack.policies import Context
from replay.pack.volcano import VolcanoScoring
from replay.trace import (
    DEFAULT_NODE_FILE,
    PACKAGED_TRACE_DIR,
    read_nodes,
    read_pod_requests,
)


def test_pack_modes_fragmentation_is_the_shared_measure() -> None:
    nodes = read_nodes(PACKAGED_TRACE_DIR / DEFAULT_NODE_FILE)[::10]
    pods = read_pod_requests(PACKAGED_TRACE_DIR / "openb_pod_list_gpuspec33.csv")
    cluster = Cluster(nodes)
    measure = Fragmentation(cluster, pack_typical_pods(pods))
    ctx = Context(cluster=cluster, rng=np.random.default_rng(1), fragmentation=measure)
    policy = VolcanoScoring()
    for pod in pods[:600]:
        d = cluster.demand(pod)
        fitting = policy.fitting(cluster, d)
        if len(fitting):
            node, gpus = policy(ctx, d, fitting)
            cluster.place(node, d, gpus)
            measure.update(node)
    typical = typical_pods(
        PodShape(num_gpu=p.num_gpu, gpu_milli=p.gpu_milli, cpu_milli=p.cpu_milli, models=p.gpu_spec)
        for p in pods
    )
    assert len(typical) == len(measure.typical.weight)
    for i in range(len(cluster.names)):
        room = NodeRoom(
            gpu_left=tuple(int(v) for v in cluster.gpu_left[i][: cluster.gpus[i]]),
            cpu_left=int(cluster.cpu_left[i]),
            model=cluster.models[cluster.model[i]],
        )
        assert node_fragmentation(room, typical) == pytest.approx(measure.node[i]), i
    assert 0 < measure.total() < cluster.capacity_milli
