from __future__ import annotations

from localfleet.controlplane import format_inventory, inventory
from localfleet.fakenodes import FakePool, default_pools, fake_nodes


def test_fake_nodes_carry_capacity_labels_taints_and_the_kwok_annotation() -> None:
    pool = FakePool(
        name="h100",
        count=2,
        resource="nvidia.com/gpu",
        per_node=8,
        labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    )
    nodes = fake_nodes([pool])
    assert [n["metadata"]["name"] for n in nodes] == ["h100-0", "h100-1"]
    node = nodes[1]
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "8"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert node["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake"}
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "h100-1"
    assert node["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    ]
    # Each node gets its own dicts: mutating one must not leak into another.
    node["spec"]["taints"].clear()
    assert nodes[0]["spec"]["taints"]


def test_default_fleet_is_16_gpu_nodes_of_8_and_4_tpu_hosts() -> None:
    nodes = fake_nodes(default_pools())
    gpus = [n for n in nodes if "nvidia.com/gpu" in n["status"]["capacity"]]
    tpus = [n for n in nodes if "google.com/tpu" in n["status"]["capacity"]]
    assert len(gpus) == 16 and all(n["status"]["capacity"]["nvidia.com/gpu"] == "8" for n in gpus)
    assert len(tpus) == 4 and all(n["status"]["capacity"]["google.com/tpu"] == "4" for n in tpus)
    capacity_types = {n["metadata"]["labels"]["fleetplane.dev/capacity-type"] for n in gpus}
    assert capacity_types == {"spot", "on-demand"}


def test_inventory_sums_accelerators_per_pool_and_counts_ready_nodes() -> None:
    nodes = fake_nodes(default_pools())
    nodes[0]["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    rows = {row["pool"]: row for row in inventory(nodes)}
    assert rows["h100-ondemand"]["nodes"] == 8
    assert rows["h100-ondemand"]["ready"] == 1
    assert rows["tpu-v5e"]["accelerators"] == {"google.com/tpu": 16}
    text = format_inventory(list(rows.values()))
    assert text.splitlines()[-1] == "total: 128 nvidia.com/gpu, 16 google.com/tpu"
