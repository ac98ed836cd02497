"""The fragmentation concern's decision on a snapshot, by hand: nodes of one pool with some GPUs
free, the fleet's typical pods learned from its own pods."""

from __future__ import annotations

import pytest

from controller.decide.fragmentation import plan_fragmentation, workload
from controller.observe.model import Node, Pod
from fleet import labels as keys
from fleet.fragmentation import NodeRoom, PodShape, fragmented_gpus, typical_pods
from tests.controller.builders import a_node, a_pod, fleet


def test_a_node_with_fewer_free_gpus_than_the_typical_pods_ask_is_fragmented() -> None:
    # Typical pods: 8-GPU pods 3 times out of 4, 1-GPU pods once.
    typical = typical_pods([PodShape(num_gpu=8)] * 3 + [PodShape(num_gpu=1)], popularity=1.0)
    three_free = NodeRoom(gpu_left=(1000,) * 3)
    all_free = NodeRoom(gpu_left=(1000,) * 8)
    # 3 free GPUs: an 8-GPU pod cannot run there (all 3 count, weight 3/4), a 1-GPU pod can.
    assert fragmented_gpus([three_free], typical) == pytest.approx(2.25)
    assert fragmented_gpus([all_free], typical) == 0
    # A share: a GPU with 300 milli left is too small for a 500-milli pod.
    shares = typical_pods([PodShape(num_gpu=1, gpu_milli=500)], popularity=1.0)
    assert fragmented_gpus([NodeRoom(gpu_left=(300, 1000))], shares) == pytest.approx(0.3)
    # CPU: a node without the CPU a pod asks strands all its free GPUs; unknown CPU does not.
    cpu = typical_pods([PodShape(num_gpu=1, cpu_milli=8000)], popularity=1.0)
    assert fragmented_gpus([NodeRoom(gpu_left=(1000, 1000), cpu_left=4000)], cpu) == 2
    assert fragmented_gpus([NodeRoom(gpu_left=(1000, 1000))], cpu) == 0
    # A pod without GPUs counts every free GPU (the paper's definition).
    assert fragmented_gpus([all_free], typical_pods([PodShape(num_gpu=0)])) == 8


def _node(name: str) -> Node:
    return a_node(name).gpus(8).label(keys.POOL, "h100").build()


def test_the_plan_measures_each_pool_on_the_fleets_own_pods() -> None:
    nodes = {n.name: n for n in (_node("n1"), _node("n2"))}
    pods: list[Pod] = [
        a_pod("train-a").gpus(8).on("n1").build(),  # n1 full
        a_pod("one-a").gpus(1).on("n2").build(),
        a_pod("four-a").gpus(4).on("n2").build(),  # n2: 3 free
        a_pod("wait").gpus(8).pending(since=0).build(),  # pending, asks 8
        a_pod("done").gpus(2).on("n2").finished(at=1).build(),  # gone: neither holds nor counts
    ]
    typical = workload(pods, "nvidia.com/gpu")
    assert {t.shape.num_gpu: round(t.weight, 2) for t in typical} == {8: 0.5, 4: 0.25, 1: 0.25}
    (measured,) = plan_fragmentation(pods, nodes, fleet())
    assert (measured.pool, measured.model, measured.allocatable, measured.free) == (
        "h100",
        "h100-80gb",
        16,
        3,
    )
    # n2's 3 free GPUs: no 8- or 4-GPU pod fits (3/4 of the workload), a 1-GPU pod does.
    assert measured.fragmented == pytest.approx(2.25)
    assert measured.share == pytest.approx(2.25 / 16)


def test_without_pods_the_traces_gpu_pods_stand_in() -> None:
    typical = workload([], "nvidia.com/gpu")
    assert [t.shape.num_gpu for t in typical] == [1]


def test_the_workload_counted_by_device_count_is_the_one_of_a_shape_per_pod() -> None:
    # `workload` counts pods per device count before ranking; ranking one shape per pod (what
    # it did before) gives the same typical pods and weights, ties and the 95 % cut included.
    counts = [1] * 40 + [8] * 40 + [2] * 9 + [4] * 9 + [3] * 2
    pods = [a_pod(f"p{i}").gpus(n).on("n1").build() for i, n in enumerate(counts)]
    pods.append(a_pod("done").gpus(4).on("n1").finished(at=1).build())
    expected = typical_pods([PodShape(num_gpu=n) for n in counts])
    assert workload(pods, "nvidia.com/gpu") == expected
    assert [t.shape.num_gpu for t in expected] == [8, 1, 4, 2]
