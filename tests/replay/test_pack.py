"""Pack mode with answers computed by hand: the fragmentation measure, FGD's choice of GPU,
what each model and CPU limit does, and the model of the shipped Volcano configuration."""

from __future__ import annotations

import numpy as np
import pytest

from replay.pack.cluster import Cluster
from replay.pack.experiment import run_once
from replay.pack.fragmentation import Fragmentation, TypicalPods, typical_pods
from replay.pack.policies import Context, fgd
from replay.pack.volcano import SHIPPED, VolcanoScoring, VolcanoWeights, shipped_placement
from replay.trace import PodRequest, TraceNode

NODE = TraceNode(name="n0", gpus=2, model="T4", cpu_milli=32000, memory_mib=65536)


def request(
    name: str, milli: int = 1000, gpus: int = 1, cpu: int = 1000, **kw: object
) -> PodRequest:
    return PodRequest(
        name=name,
        cpu_milli=cpu,
        memory_mib=1024,
        num_gpu=gpus,
        gpu_milli=milli,
        **kw,  # type: ignore[arg-type]
    )


def half_and_whole() -> TypicalPods:
    """Two typical pods, equally common: half a GPU, and one whole GPU, on any model."""
    return TypicalPods(
        cpu=np.array([1000, 1000]),
        milli=np.array([500, 1000]),
        num_gpu=np.array([1, 1]),
        weight=np.array([0.5, 0.5]),
        specs=((), ()),
    )


def test_fragmentation_and_fgd_by_hand() -> None:
    cluster = Cluster([NODE])
    cluster.place(0, cluster.demand(request("seven-tenths", milli=700)), np.array([1]))
    frag = Fragmentation(cluster, half_and_whole())
    # GPUs free: [1000, 300]. Both typical pods still fit (GPU 0), and GPU 1's 300 is too
    # small for either: 0.5 x 300 + 0.5 x 300.
    assert frag.node[0] == pytest.approx(300.0)
    # A 200 share on GPU 0 (-> 800) leaves no whole GPU: the whole-GPU pod's half counts all
    # 1,100 free: 0.5 x 300 + 0.5 x 1100 = 700. On GPU 1 (-> 100): 0.5 x 100 + 0.5 x 100 = 100.
    ctx = Context(cluster=cluster, rng=np.random.default_rng(0), fragmentation=frag)
    node, gpus = fgd(ctx, cluster.demand(request("fifth", milli=200)), np.array([0]))
    assert (node, gpus.tolist()) == (0, [1])


def test_a_pod_that_names_a_model_fits_only_that_model() -> None:
    nodes = [NODE, TraceNode(name="n1", gpus=8, model="G2", cpu_milli=96000, memory_mib=1 << 19)]
    cluster = Cluster(nodes)
    pinned = cluster.demand(request("pinned", gpu_spec=("G2",)))
    assert [cluster.names[i] for i in cluster.fitting(pinned)] == ["n1"]
    hungry = cluster.demand(request("hungry", cpu=64000))
    assert [cluster.names[i] for i in cluster.fitting(hungry)] == ["n1"]  # n0 has 32 cores


def test_typical_pods_cover_95_percent_most_common_first() -> None:
    pods = [request(f"a{i}") for i in range(90)] + [request(f"b{i}", milli=500) for i in range(6)]
    pods += [request(f"c{i}", gpus=8) for i in range(4)]
    typical = typical_pods(pods)
    assert typical.milli.tolist() == [1000, 500]  # 96 of 100 pods; the 8-GPU shape is left out
    assert typical.weight.tolist() == pytest.approx([90 / 96, 6 / 96])


def test_shipped_volcano_weights_are_read_from_the_configuration() -> None:
    assert (
        VolcanoWeights(
            binpack=10,
            binpack_cpu=1,
            binpack_memory=1,
            binpack_gpu=10,
            least_requested=1,
            most_requested=0,
            balanced_resource=1,
            taint_toleration=3,
        )
        == SHIPPED
    )


def test_shipped_placement_packs_gpus_onto_the_used_node() -> None:
    nodes = [NODE, TraceNode(name="n1", gpus=2, model="T4", cpu_milli=32000, memory_mib=65536)]
    for seed in range(4):
        placed = shipped_placement(
            [request("p1"), request("p2"), request("p3", gpus=2)], nodes, seed=seed
        )
        # p1 goes to either idle node; p2 joins it (binpack's GPU weight outweighs
        # nodeorder's spreading); the 2-GPU pod then takes the other node whole.
        first = placed[0][1]
        other = "n1" if first == "n0" else "n0"
        assert placed == [("p1", first, (0,)), ("p2", first, (1,)), ("p3", other, (0, 1))]


def test_volcano_breaks_ties_at_random_over_every_equal_node() -> None:
    """As vc-scheduler's SelectBestNodeAndScore: each of three idle, identical nodes gets the
    first pod sometimes, not the first by name always."""
    nodes = [
        TraceNode(name=f"n{i}", gpus=2, model="T4", cpu_milli=32000, memory_mib=65536)
        for i in range(3)
    ]
    chosen = {shipped_placement([request("p1")], nodes, seed=seed)[0][1] for seed in range(30)}
    assert chosen == {"n0", "n1", "n2"}


def test_volcano_score_is_the_real_schedulers_to_the_last_bit() -> None:
    """vc-scheduler v1.15.1 (-v=5) scored a pod of 11.3 cores, 48 GiB and one GPU on an idle
    T4 node of 104 cores, 512 GiB and two GPUs: binpack 433.5336538461538, batch 470
    (leastrequested 89, balancedresource 81, tainttoleration 300), total 903.5336538461538;
    on an idle P100 node of 16 cores, 120 GiB, two GPUs, binpack 508.85416666666674."""
    t4 = TraceNode(name="t4", gpus=2, model="T4", cpu_milli=104000, memory_mib=524288)
    p100 = TraceNode(name="p100", gpus=2, model="P100", cpu_milli=16000, memory_mib=122880)
    cluster = Cluster([p100, t4])
    pod = PodRequest(name="p", cpu_milli=11300, memory_mib=49152, num_gpu=1, gpu_milli=1000)
    scores = VolcanoScoring().scores(cluster, cluster.demand(pod), np.array([0, 1]))
    assert scores[1] == 903.5336538461538
    assert scores[0] - (44 + 87 + 300) == pytest.approx(508.85416666666674, abs=1e-12)


def test_fgd_leaves_fewer_gpus_unallocated_than_random_on_a_small_cluster() -> None:
    nodes = [
        TraceNode(name=f"n{i:02}", gpus=8, model="G2", cpu_milli=96000, memory_mib=1 << 19)
        for i in range(8)
    ]
    # Shares of 600 and 400 fill a GPU together; whole GPUs need GPUs no share has touched.
    pods = [request(f"s{i}", milli=600) for i in range(30)]
    pods += [request(f"t{i}", milli=400) for i in range(30)]
    pods += [request(f"w{i}") for i in range(20)]
    fgd_run = run_once(pods, nodes, "fgd", seed=1)
    random_run = run_once(pods, nodes, "random", seed=1)
    assert fgd_run.unallocated[-1] < random_run.unallocated[-1]
