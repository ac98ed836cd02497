"""Each real part answers: the control plane schedules onto kwok GPU/TPU nodes, OPA evaluates
through opa-python-client, Prometheus answers PromQL over DCGM-shaped series."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from localfleet.controlplane import LocalCluster, inventory
from localfleet.servers import OpaServer, Sample

pytestmark = pytest.mark.integration

GPU_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def accelerator_pod(
    name: str, resource: str, count: int, tolerations: list[dict[str, str]]
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "tolerations": tolerations,
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "resources": {"limits": {resource: str(count)}},
                }
            ],
        },
    }


def wait_for(predicate: Any, timeout: float = 60.0, interval: float = 0.3) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


def get_pod(kube: LocalCluster, namespace: str, name: str) -> dict[str, Any]:
    return kube.get_json("pod", name, "-n", namespace)


def test_fleet_inventory_matches_the_default_pools(kube: LocalCluster) -> None:
    rows = {row["pool"]: row for row in inventory(kube.get_json("nodes")["items"])}
    assert rows["h100-ondemand"]["accelerators"] == {"nvidia.com/gpu": 64}
    assert rows["a100-spot"]["accelerators"] == {"nvidia.com/gpu": 64}
    assert rows["tpu-v5e"]["accelerators"] == {"google.com/tpu": 16}
    assert all(row["ready"] == row["nodes"] for row in rows.values())
    node = kube.get_json("node", "a100-spot-0")
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
    assert {"key": "fleetplane.dev/capacity-type", "value": "spot", "effect": "NoSchedule"} in node[
        "spec"
    ]["taints"]


def test_gpu_pod_lands_on_a_fake_gpu_node_and_runs(kube: LocalCluster, namespace: str) -> None:
    kube.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(accelerator_pod("train", "nvidia.com/gpu", 2, GPU_TOLERATIONS)),
    )
    pod = wait_for(
        lambda: (p := get_pod(kube, namespace, "train"))["status"].get("phase") == "Running" and p
    )
    assert pod["spec"]["nodeName"].startswith("h100-ondemand-")  # spot nodes are tainted
    node = kube.get_json("node", pod["spec"]["nodeName"])
    assert int(node["status"]["allocatable"]["nvidia.com/gpu"]) >= 2


def test_tpu_pod_lands_on_a_tpu_host(kube: LocalCluster, namespace: str) -> None:
    tolerations = [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}]
    kube.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(accelerator_pod("jax", "google.com/tpu", 4, tolerations)),
    )
    pod = wait_for(
        lambda: (p := get_pod(kube, namespace, "jax"))["status"].get("phase") == "Running" and p
    )
    assert pod["spec"]["nodeName"].startswith("tpu-v5e-")


def test_pod_asking_more_gpus_than_any_node_has_stays_pending(
    kube: LocalCluster, namespace: str
) -> None:
    kube.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(accelerator_pod("huge", "nvidia.com/gpu", 9, GPU_TOLERATIONS)),
    )

    def unschedulable() -> dict[str, Any] | None:
        pod = get_pod(kube, namespace, "huge")
        for condition in pod["status"].get("conditions", []):
            if condition["type"] == "PodScheduled" and condition.get("reason") == "Unschedulable":
                return pod
        return None

    pod = unschedulable() or wait_for(unschedulable)
    assert pod["status"]["phase"] == "Pending"
    assert "nodeName" not in pod["spec"]
    assert "Insufficient nvidia.com/gpu" in json.dumps(pod["status"]["conditions"])


def test_opa_takes_data_as_the_controller_publishes_it(opa_server: OpaServer) -> None:
    """The controller's own client (controller.act.opa) replaces a data document, and OPA
    serves it back."""
    from controller.act import opa as controller_opa

    opa_server.put_data("smoke", {"gpus_per_node": 8})
    client = controller_opa.Opa(opa_server.url)
    client.put_data(controller_opa.SPEND_PATH, {"research": {"usd": 4.0}}, what="spend")
    assert opa_server.query("fleetplane/spend") == {"research": {"usd": 4.0}}
    assert opa_server.query("smoke") == {"gpus_per_node": 8}


def test_prometheus_answers_promql_over_dcgm_series(prometheus_factory: Any) -> None:
    now = time.time()
    samples = [
        Sample(
            "DCGM_FI_DEV_GPU_UTIL",
            {
                "Hostname": "h100-ondemand-0",
                "gpu": str(gpu),
                "pod": "train",
                "namespace": "ml-research",
            },
            value,
            now - 600 + step * 30,
        )
        for gpu, value in ((0, 90.0), (1, 10.0))
        for step in range(20)
    ]
    prometheus = prometheus_factory(samples)
    result = prometheus.query(
        'avg by (pod, namespace) (avg_over_time(DCGM_FI_DEV_GPU_UTIL{namespace="ml-research"}[15m]))',
        at=now,
    )
    assert len(result) == 1
    assert result[0]["metric"] == {"pod": "train", "namespace": "ml-research"}
    assert float(result[0]["value"][1]) == pytest.approx(50.0)
