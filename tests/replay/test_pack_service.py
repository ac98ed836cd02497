"""`volcano:fgd`, the shipped scheduler with the placement service as its extender, in pack
mode: FGD decides, Volcano's own scores break its ties, the service is asked (and learns)
only when a pod has a choice."""

from __future__ import annotations

import numpy as np

from fleet.placement import SCORE_SCALE
from placement.workload import Workload, read_seed
from replay.pack.cluster import Cluster
from replay.pack.experiment import known_policies, policy_named
from replay.pack.policies import Context
from replay.pack.service import NAME, FgdService
from replay.pack.volcano import VolcanoScoring
from replay.trace import PodRequest, TraceNode


def node(name: str) -> TraceNode:
    return TraceNode(name=name, gpus=8, model="V100M16", cpu_milli=96000, memory_mib=1 << 19)


def pod(name: str, *, gpus: int, cpu: int) -> PodRequest:
    return PodRequest(name=name, cpu_milli=cpu, memory_mib=1024, num_gpu=gpus, gpu_milli=1000)


def test_a_cpu_only_pod_goes_where_the_gpus_are_taken() -> None:
    cluster = Cluster([node("a"), node("b")])
    whole = cluster.demand(pod("eight", gpus=8, cpu=56000))
    cluster.place(1, whole, np.arange(8))  # b: every GPU taken, 40 cores idle
    busy = cluster.demand(pod("busy", gpus=0, cpu=80000))
    cluster.place(0, busy, np.array([], dtype=np.int64))  # a: 8 GPUs idle, 16 cores idle
    cpu_only = cluster.demand(pod("cpu", gpus=0, cpu=8000))
    both = np.array([0, 1])
    shipped = VolcanoScoring().scores(cluster, cpu_only, both)
    service = FgdService(Workload(read_seed(), window=0))
    fgd_points = service.service_points(cluster, cpu_only, both)
    assert fgd_points[1] > fgd_points[0]
    for seed in range(5):
        ctx = Context(cluster=cluster, rng=np.random.default_rng(seed))
        chosen, _ = service(ctx, cpu_only, both)
        assert chosen == 1
    # one FGD point outweighs all of Volcano's (SCORE_SCALE), so FGD decides
    assert shipped.max() < SCORE_SCALE


def test_the_service_is_asked_and_learns_only_when_there_is_a_choice() -> None:
    cluster = Cluster([node("a"), node("b")])
    service = FgdService(Workload(read_seed(), window=10))
    ctx = Context(cluster=cluster, rng=np.random.default_rng(0))
    d = cluster.demand(pod("one", gpus=1, cpu=4000))
    service(ctx, d, np.array([0]))
    assert (service.calls, service.workload.learned) == (0, 0)
    service(ctx, d, np.array([0, 1]))
    assert (service.calls, service.workload.learned) == (1, 1)


def test_it_is_a_pack_policy_of_its_own_each_draw_with_a_fresh_service() -> None:
    assert NAME in known_policies()
    first, second = policy_named(NAME), policy_named(NAME)
    assert isinstance(first, FgdService) and isinstance(second, FgdService)
    assert first.workload is not second.workload
