"""The service's FGD against the replay's (pack mode's measure and policy): the same scores
on the same cluster states, for whole GPUs, shares, CPU-only pods and model constraints."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from placement import fgd
from placement.workload import Workload, read_seed
from replay.pack import policies
from replay.pack.cluster import Cluster
from replay.pack.fragmentation import Fragmentation
from replay.pack.fragmentation import typical_pods as replay_typical_pods
from replay.trace import DEFAULT_TRACE_DIR, read_nodes, read_pod_requests

TRACE = Path(DEFAULT_TRACE_DIR)


@pytest.fixture(scope="module")
def trace() -> tuple[list, list]:
    pods = read_pod_requests(TRACE / "openb_pod_list_default.csv")
    nodes = read_nodes(TRACE / "openb_node_list_gpu_node.csv")
    return pods, nodes


def service_nodes(c: Cluster, typical: fgd.TypicalPods, nodes: np.ndarray) -> fgd.Nodes:
    accepts = typical.accepts(c.models).T  # models x T
    return fgd.Nodes(
        gpu_left=c.gpu_left[nodes], cpu_left=c.cpu_left[nodes], accepts=accepts[c.model[nodes]]
    )


def test_the_shipped_seed_gives_the_replays_typical_pods(trace: tuple[list, list]) -> None:
    pods, nodes = trace
    models = Cluster(nodes).models
    want = replay_typical_pods(pods)
    got = Workload(read_seed(), window=0).typical()
    assert np.array_equal(got.cpu, want.cpu)
    assert np.array_equal(got.milli, want.milli)
    assert np.array_equal(got.num_gpu, want.num_gpu)
    assert np.allclose(got.weight, want.weight)
    assert np.array_equal(got.accepts(models), want.accepts(models))


def test_scores_are_the_replays_on_a_half_full_cluster(trace: tuple[list, list]) -> None:
    """Pods placed by the replay's FGD until the cluster is half full; then every kind of
    pod is scored on every node it fits on by both."""
    pods, nodes = trace
    rng = np.random.default_rng(3)
    c = Cluster(nodes)
    replay_typical = replay_typical_pods(pods)
    typical = Workload(read_seed(), window=0).typical()
    frag = Fragmentation(c, replay_typical)
    ctx = policies.Context(cluster=c, rng=rng, fragmentation=frag)
    for i in rng.permutation(len(pods)):
        if c.allocated_milli >= c.capacity_milli // 2:
            break
        d = c.demand(pods[i])
        fit = c.fitting(d)
        if len(fit):
            node, gpus = policies.fgd(ctx, d, c.distinct(fit))
            c.place(node, d, gpus)
            frag.update(node)
    kinds = {"cpu": 0, "whole": 0, "share": 0, "spec": 0}
    # Scored: pods of the list with a third asking for GPU models (the typical pods stay the
    # default list's).
    asked = read_pod_requests(TRACE / "openb_pod_list_gpuspec33.csv")
    for i in rng.choice(len(asked), size=300, replace=False):
        pod = asked[i]
        d = c.demand(pod)
        fit = c.fitting(d)
        if not len(fit):
            continue
        demand = fgd.Demand(cpu_milli=d.cpu, num_gpu=d.num_gpu, gpu_milli=d.milli)
        got, gpu = fgd.scores(typical, service_nodes(c, typical, fit), demand)
        kinds["spec"] += bool(pod.gpu_spec)
        if d.shared:
            kinds["share"] += 1
            # The replay's choice of node and GPU is the first of the best.
            node, gpus = policies.fgd(ctx, d, fit)
            best = int(np.argmax(got))
            assert fit[best] == node
            assert gpu[best] == gpus[0]
            continue
        if d.num_gpu == 0:
            kinds["cpu"] += 1
            after = frag.amount(
                frag.room[fit],
                frag.stranded[fit],
                c.left_total[fit],
                c.cpu_left[fit] - d.cpu,
                frag.accepts[fit],
            )
        else:
            kinds["whole"] += 1
            after = frag.after_whole(fit, d.num_gpu, d.cpu)
        want = fgd.sigmoid_score(frag.node[fit] - after)
        assert np.array_equal(got, want), pod
    assert min(kinds.values()) > 0, kinds


def test_a_whole_gpu_pod_scores_minus_one_where_its_gpus_are_not_free() -> None:
    typical = fgd.typical_pods([(fgd.Shape(8000, 1000, 1), 1.0)])
    nodes = fgd.Nodes(
        gpu_left=np.array([[1000, 1000], [500, 0]]),
        cpu_left=np.array([16000, 16000]),
        accepts=np.ones((2, 1), dtype=bool),
    )
    got, _ = fgd.scores(typical, nodes, fgd.Demand(cpu_milli=1000, num_gpu=1, gpu_milli=1000))
    assert got[1] == -1 and got[0] >= 0
