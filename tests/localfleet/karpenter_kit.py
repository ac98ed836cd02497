"""The Karpenter tests' shared parts: a local fleet whose two H100 pools Karpenter scales, the
real Karpenter-kwok beside the session's API server and kwok (a module-scoped fixture: import
`karpenter` into a test module to use it), and the pods and reads those tests share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from fleet.config import FleetConfig, parse_fleet
from localfleet.controlplane import LocalCluster
from localfleet.karpenter import LocalKarpenter, karpenter_cluster
from tests.components.component_testkit import minimal_raw_fleet
from tests.conftest import _LOG_SOURCES
from tests.localfleet.test_volcano import container

ON_DEMAND = "kp-h100"
SPOT = "kp-h100-spot"
H100 = "NVIDIA-H100-80GB-HBM3"


def karpenter_fleet(raw: dict[str, Any]) -> None:
    """A local cluster whose two H100 pools (on-demand and spot) Karpenter scales. Their names
    differ from the session's static fake pools, so only Karpenter's nodes fit pods that ask
    for them. Empty nodes go 5 s after their last pod."""
    raw["clusters"] = [
        {
            "name": "local",
            "provider": "local",
            "helm_charts": False,
            "autoscaler": "karpenter",
            "karpenter": {"consolidate_after": "5s"},
            "pools": [
                {
                    "name": ON_DEMAND,
                    "model": "h100-80gb",
                    "machine_type": "p5.48xlarge",
                    "max_nodes": 3,
                },
                {
                    "name": SPOT,
                    "model": "h100-80gb",
                    "machine_type": "p5.48xlarge",
                    "capacity_type": "spot",
                    "max_nodes": 2,
                },
            ],
        }
    ]
    raw["teams"][0]["quota"] = {"nvidia.com/gpu": 16}


def local_fleet() -> FleetConfig:
    raw = minimal_raw_fleet()
    karpenter_fleet(raw)
    return parse_fleet(raw)


@pytest.fixture(scope="module")
def karpenter(kube: LocalCluster) -> Iterator[LocalKarpenter]:
    with running_karpenter(kube, local_fleet()) as runner:
        yield runner


@contextmanager
def running_karpenter(kube: LocalCluster, fleet: FleetConfig) -> Iterator[LocalKarpenter]:
    """Karpenter-kwok scaling `fleet`'s Karpenter pools on `kube` until the block ends; then its
    nodes and NodePools are taken away."""
    local = karpenter_cluster(fleet)
    assert local is not None
    runner = LocalKarpenter(cluster=kube, fleet=fleet, fleet_cluster=local, detached=False)
    runner.start()
    _LOG_SOURCES["karpenter"] = runner.log_tail
    try:
        yield runner
    finally:
        _LOG_SOURCES.pop("karpenter", None)
        runner.stop()
        # Karpenter's nodes carry its finalizer: with Karpenter gone, take them off by hand so
        # that the tests sharing this control plane see only the static fleet.
        for node in karpenter_nodes(kube):
            kube.kubectl(
                "patch",
                "node",
                node["metadata"]["name"],
                "--type=merge",
                "-p",
                '{"metadata":{"finalizers":null}}',
                check=False,
            )
            kube.kubectl("delete", "node", node["metadata"]["name"], "--wait=false", check=False)
        kube.kubectl("delete", "nodepools", "--all", "--wait=false", check=False)


def karpenter_nodes(kube: LocalCluster, pool: str | None = None) -> list[dict[str, Any]]:
    selector = f"fleetplane.dev/pool={pool}" if pool else "karpenter.sh/nodepool"
    return list(kube.get_json("nodes", "-l", selector)["items"])


def ready(node: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in node.get("status", {}).get("conditions", [])
    )


def gang(namespace: str, job: str, members: int, pool: str, *, spot: bool) -> list[dict[str, Any]]:
    """`members` pods of 8 GPUs each, one job, pinned to a pool by its label (and to spot
    capacity by Karpenter's, as the gate's spot rule writes it)."""
    selector = {"fleetplane.dev/pool": pool, "nvidia.com/gpu.product": H100}
    if spot:
        selector["karpenter.sh/capacity-type"] = "spot"
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{job}-{i}", "namespace": namespace, "labels": {"job": job}},
            "spec": {
                "containers": [container(8)],
                "nodeSelector": selector,
                # the taints of the pool's nodes, not Karpenter's own (`unregistered`): the pods
                # wait until Karpenter has registered the node, as on EKS
                "tolerations": [
                    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                    {
                        "key": "fleetplane.dev/capacity-type",
                        "operator": "Exists",
                        "effect": "NoSchedule",
                    },
                ],
                "terminationGracePeriodSeconds": 0,
            },
        }
        for i in range(members)
    ]


def running_on(kube: LocalCluster, namespace: str, job: str, count: int) -> list[str] | None:
    pods = kube.get_json("pods", "-n", namespace, "-l", f"job={job}")["items"]
    if len(pods) != count or not all(p["status"].get("phase") == "Running" for p in pods):
        return None
    return sorted(p["spec"]["nodeName"] for p in pods)
