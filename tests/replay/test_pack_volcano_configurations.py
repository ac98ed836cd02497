"""The Volcano configurations pack mode compares with the shipped one: the scheduler tiers each
writes (what the real vc-scheduler would run) read back to the weights and predicate the model
scores with, and resource-strategy-fit's proportional predicate worked by hand."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest
import yaml

from fleet.volcano import SCHEDULER_TIERS, plugin_arguments
from replay.pack.cluster import Cluster
from replay.pack.experiment import VOLCANO_VARIANTS, run_once
from replay.pack.volcano import (
    RESOURCE_STRATEGY_FIT,
    SHIPPED,
    Proportional,
    VolcanoScoring,
    VolcanoWeights,
    gpu_binpack_tiers,
    most_requested_tiers,
    no_spreading_tiers,
    reserve_cpu_for_gpus_tiers,
)
from replay.trace import PodRequest, TraceNode

RESERVE_12 = Proportional(cpu=12, memory=0)


def test_each_configuration_reads_back_to_the_weights_it_means() -> None:
    spread_off = {"least_requested": 0, "balanced_resource": 0}
    assert VolcanoWeights.of(gpu_binpack_tiers()) == replace(
        SHIPPED, binpack_cpu=0, binpack_memory=0, **spread_off
    )
    assert VolcanoWeights.of(most_requested_tiers()) == replace(
        SHIPPED, least_requested=0, most_requested=1
    )
    assert VolcanoWeights.of(no_spreading_tiers()) == replace(SHIPPED, **spread_off)
    assert VolcanoWeights.of(reserve_cpu_for_gpus_tiers()) == replace(
        SHIPPED, proportional=RESERVE_12
    )
    assert VolcanoWeights.of(reserve_cpu_for_gpus_tiers(gpu_binpack_tiers())) == replace(
        SHIPPED, binpack_cpu=0, binpack_memory=0, **spread_off, proportional=RESERVE_12
    )
    assert VOLCANO_VARIANTS["reserve-cpu-for-gpus"] == replace(SHIPPED, proportional=RESERVE_12)


def test_writing_a_configuration_leaves_the_shipped_tiers_alone() -> None:
    before = copy.deepcopy(SCHEDULER_TIERS)
    reserve_cpu_for_gpus_tiers(gpu_binpack_tiers(most_requested_tiers()))
    assert before == SCHEDULER_TIERS
    assert SHIPPED.proportional is None


def test_the_reserve_configuration_is_a_predicate_of_resource_strategy_fit_only() -> None:
    """As vc-scheduler reads the configuration file: the plugin enabled in the last tier, its
    scoring off (weight 0, no sra), the proportional policy nested as v1.15 reads it."""
    tiers = yaml.safe_load(yaml.safe_dump(reserve_cpu_for_gpus_tiers(cpu=8, memory=4)))
    assert tiers[-1]["plugins"][-1]["name"] == RESOURCE_STRATEGY_FIT
    assert plugin_arguments(tiers, RESOURCE_STRATEGY_FIT) == {
        "resourceStrategyFitWeight": 0,
        "proportional": {
            "enable": True,
            "resources": "nvidia.com/gpu",
            "resourceProportion": {"nvidia.com/gpu.cpu": 8, "nvidia.com/gpu.memory": 4},
        },
    }
    assert VolcanoWeights.of(tiers).proportional == Proportional(cpu=8, memory=4)
    # Everything else as shipped.
    others = [[p for p in t["plugins"] if p["name"] != RESOURCE_STRATEGY_FIT] for t in tiers]
    assert others == [t["plugins"] for t in SCHEDULER_TIERS]


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        ({"proportional": {"enable": True}}, "resourceStrategyFitWeight is None"),
        ({"resourceStrategyFitWeight": 10}, "resourceStrategyFitWeight is 10"),
        ({"resourceStrategyFitWeight": -1}, "must be 0"),
        ({"resourceStrategyFitWeight": 0, "sra": {"enable": True}}, "does not score sra"),
    ],
)
def test_resource_strategy_fit_scoring_is_refused_not_ignored(
    arguments: dict[str, object], complaint: str
) -> None:
    tiers = [{"plugins": [{"name": RESOURCE_STRATEGY_FIT, "arguments": arguments}]}]
    with pytest.raises(ValueError, match=complaint):
        VolcanoWeights.of(tiers)


def test_proportional_rates_default_as_volcano_does() -> None:
    """A rate left out, or negative, is 1 (`calculateProportionalResources`); a policy without
    nvidia.com/gpu, or disabled, checks nothing the model has."""

    def read(policy: dict[str, object]) -> Proportional | None:
        arguments = {"resourceStrategyFitWeight": 0, "proportional": policy}
        tiers = [{"plugins": [{"name": RESOURCE_STRATEGY_FIT, "arguments": arguments}]}]
        return VolcanoWeights.of(tiers).proportional

    gpu = {"enable": True, "resources": "google.com/tpu, nvidia.com/gpu"}
    assert read(gpu) == Proportional(cpu=1.0, memory=1.0)
    assert read(gpu | {"resourceProportion": {"nvidia.com/gpu.cpu": -3}}) == Proportional(1.0, 1.0)
    assert read({"enable": True, "resources": "google.com/tpu"}) is None
    assert read({"enable": False, "resources": "nvidia.com/gpu"}) is None


def pod(name: str, *, cpu: int, gpus: int = 0, memory: int = 1024) -> PodRequest:
    return PodRequest(
        name=name, cpu_milli=cpu, memory_mib=memory, num_gpu=gpus, gpu_milli=1000 if gpus else 0
    )


def test_proportional_predicate_by_hand() -> None:
    """12 cores per idle GPU on a node of 32 cores and 2 GPUs: a CPU pod may leave 24 cores,
    so 8 fit and 9 do not; with one GPU taken, 20 fit; with both, everything that fits."""
    node = TraceNode(name="n0", gpus=2, model="T4", cpu_milli=32000, memory_mib=65536)
    cluster = Cluster([node])
    model = VolcanoScoring(replace(SHIPPED, proportional=RESERVE_12))

    def admitted(cpu: int, gpus: int = 0) -> bool:
        return len(model.fitting(cluster, cluster.demand(pod("p", cpu=cpu, gpus=gpus)))) == 1

    assert (admitted(8000), admitted(8001)) == (True, False)
    assert admitted(30000, gpus=1)  # pods that ask for GPUs pass
    cluster.place(0, cluster.demand(pod("g", cpu=0, gpus=1)), np.array([0]))
    assert (admitted(20000), admitted(20001)) == (True, False)
    cluster.place(0, cluster.demand(pod("g2", cpu=0, gpus=1)), np.array([1]))
    assert admitted(32000)
    # The shipped configuration has no such predicate: fitting is the resource fit.
    fresh = Cluster([node])
    assert len(VolcanoScoring().fitting(fresh, fresh.demand(pod("p", cpu=32000)))) == 1


def test_proportional_memory_counts_gb_per_gpu() -> None:
    """Volcano reserves rate x idle milli-GPUs x 10^6 bytes: 4 GB per GPU, 8e9 bytes for two
    (7629.39 MiB); of 16 GiB, a pod may take 8754 MiB but not 8755."""
    node = TraceNode(name="n0", gpus=2, model="T4", cpu_milli=32000, memory_mib=16384)
    cluster = Cluster([node])
    model = VolcanoScoring(replace(SHIPPED, proportional=Proportional(cpu=0, memory=4)))
    fits = [
        len(model.fitting(cluster, cluster.demand(pod("p", cpu=1000, memory=m))))
        for m in (8754, 8755)
    ]
    assert fits == [1, 0]


def test_the_predicate_keeps_cpu_pods_off_the_node_with_idle_gpus() -> None:
    """Two nodes, one with its GPUs taken: in the experiment every CPU pod goes to that one
    (the shipped scoring alone spreads them onto the idle node too)."""
    nodes = [
        TraceNode(name="busy", gpus=8, model="G2", cpu_milli=96000, memory_mib=1 << 19),
        TraceNode(name="idle", gpus=8, model="G2", cpu_milli=96000, memory_mib=1 << 19),
    ]
    cluster = Cluster(nodes)
    cluster.place(0, cluster.demand(pod("eight", cpu=8000, gpus=8)), np.arange(8))
    reserve = VolcanoScoring(replace(SHIPPED, proportional=RESERVE_12))
    cpu_pod = cluster.demand(pod("cpu", cpu=4000))
    assert [cluster.names[i] for i in reserve.fitting(cluster, cpu_pod)] == ["busy"]


def test_in_the_experiment_cpu_pods_no_longer_strand_gpus() -> None:
    """Two nodes of 8 GPUs and 96 cores; one-GPU pods of 10 cores, CPU pods of 30. A CPU pod
    on a node leaves room for 6 GPU pods, not 8: the shipped configuration strands GPUs
    when one arrives early. With 12 cores kept per idle GPU no CPU pod is ever admitted
    (96 - 10k - 30 < 12 (8 - k) for every k GPUs taken), so every GPU is allocated, and the CPU
    pods are the ones that find no node."""
    nodes = [
        TraceNode(name=f"n{i}", gpus=8, model="G2", cpu_milli=96000, memory_mib=1 << 19)
        for i in range(2)
    ]
    pods = [pod(f"g{i}", cpu=10000, gpus=1) for i in range(12)]
    pods += [pod(f"c{i}", cpu=30000) for i in range(3)]
    stranded = []
    for seed in range(5):
        reserve = run_once(pods, nodes, "volcano:reserve-cpu-for-gpus", seed=seed)
        shipped = run_once(pods, nodes, "volcano", seed=seed)
        assert reserve.pods == shipped.pods  # the same arrivals
        assert reserve.unallocated[-1] == 0.0
        stranded.append(shipped.unallocated[-1])
    assert max(stranded) > 0.0
