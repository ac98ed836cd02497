"""Karpenter pools under the Pulumi mocks: the switch in the fleet configuration, what the
NodePools and node classes ask for on EKS and on the local fleet, and the checks of the
switch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from components.platform import Platform, PlatformArgs
from fleet.config import ConfigError, FleetConfig
from tests.components.component_testkit import Declare
from tests.components.test_node_pools import NODE_GROUP, to_eks

FleetFrom = Callable[[Callable[[dict[str, Any]], None] | None], FleetConfig]
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
EC2_NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
KWOK_NODE_CLASS = "kubernetes:karpenter.kwok.sh/v1alpha1:KWOKNodeClass"


def eks_karpenter(raw: dict[str, Any]) -> None:
    """The EKS fleet of the node-pool tests, its spot A100 pool and MIG pool on Karpenter; the
    MIG pool's image ships the driver (Karpenter's accelerated AMI)."""
    to_eks(raw)
    cluster = raw["clusters"][0]
    cluster["autoscaler"] = "karpenter"
    cluster["karpenter"] = {"ami_family": "Bottlerocket", "consolidate_after": "5m"}
    mig = next(p for p in cluster["pools"] if p["name"] == "h100-mig")
    mig["driver_manager"] = "cloud"
    # the time-shared A10G pool stays a managed node group
    next(p for p in cluster["pools"] if p["name"] == "a10g-mps")["autoscaler"] = "managed"
    raw["upgrade"]["maintenance_windows"] = [{"days": ["sat", "sun"]}]


def local_karpenter(raw: dict[str, Any]) -> None:
    raw["clusters"] = [
        {
            "name": "local",
            "provider": "local",
            "helm_charts": False,
            "autoscaler": "karpenter",
            "pools": [
                {
                    "name": "h100-ondemand",
                    "model": "h100-80gb",
                    "machine_type": "p5.48xlarge",
                    "max_nodes": 2,
                },
                {
                    "name": "h100-spot",
                    "model": "h100-80gb",
                    "machine_type": "p5.48xlarge",
                    "capacity_type": "spot",
                    "max_nodes": 3,
                },
            ],
        }
    ]
    raw["teams"][0]["quota"] = {"nvidia.com/gpu": 16}


def eks_all_karpenter(raw: dict[str, Any]) -> None:
    to_eks(raw)
    raw["clusters"][0]["autoscaler"] = "karpenter"


def by_name(declared: list[Any]) -> dict[str, dict[str, Any]]:
    return {r.inputs["metadata"]["name"]: r.inputs for r in declared}


def test_eks_pools_become_nodepools_and_ec2_node_classes(
    declare: Declare, fleet_from: FleetFrom
) -> None:
    fleet = fleet_from(eks_karpenter)
    declared = declare(lambda: Platform("dev", PlatformArgs(fleet=fleet)))

    # one managed node group is left: the pool that chose `managed`
    groups = declared.of_type(NODE_GROUP)
    assert [g.inputs["nodeGroupName"] for g in groups] == ["a10g-mps"]
    pools = by_name(declared.of_type(NODE_POOL))
    classes = by_name(declared.of_type(EC2_NODE_CLASS))
    assert sorted(pools) == sorted(classes) == ["a100-spot", "h100-mig"]
    assert not declared.of_type(KWOK_NODE_CLASS)

    spot = pools["a100-spot"]["spec"]
    assert spot["template"]["spec"]["requirements"][:2] == [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p4d.24xlarge"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
    ]
    assert spot["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "a100-spot",
    }
    assert spot["template"]["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "fleetplane.dev/capacity-type", "value": "spot", "effect": "NoSchedule"},
    ]
    assert spot["template"]["metadata"]["labels"] == {
        "fleetplane.dev/pool": "a100-spot",
        "fleetplane.dev/capacity-type": "spot",
    }
    # 6 nodes of 8 physical GPUs; spot weighs less than on-demand
    assert spot["limits"] == {"nvidia.com/gpu": "48"}
    assert spot["weight"] < pools["h100-mig"]["spec"]["weight"]
    # the MIG layout the device plugin applies is a label Karpenter puts on the node
    assert pools["h100-mig"]["spec"]["template"]["metadata"]["labels"]["nvidia.com/mig.config"] == (
        "all-1g.10gb"
    )
    assert spot["disruption"] == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "5m",
        "budgets": [
            {"nodes": "25%"},
            # closed Monday 00:00 to Saturday 00:00: nodes holding work stay
            {
                "nodes": "0",
                "reasons": ["Underutilized", "Drifted"],
                "schedule": "0 0 * * 1",
                "duration": "120h0m",
            },
        ],
    }

    node_class = classes["a100-spot"]["spec"]
    assert node_class["amiSelectorTerms"] == [{"alias": "bottlerocket@latest"}]
    assert node_class["role"] == "gpu-nodes"
    assert node_class["subnetSelectorTerms"] == [{"id": "subnet-1"}, {"id": "subnet-2"}]
    assert node_class["securityGroupSelectorTerms"] == [
        {"tags": {"karpenter.sh/discovery": "fleet-dev"}}
    ]
    assert node_class["blockDeviceMappings"][0]["ebs"]["volumeSize"] == "200Gi"


def test_local_pools_use_the_kwok_node_class_and_gpu_labels(
    declare: Declare, fleet_from: FleetFrom
) -> None:
    fleet = fleet_from(local_karpenter)
    declared = declare(lambda: Platform("local", PlatformArgs(fleet=fleet)))
    assert not declared.of_type(NODE_GROUP)
    assert [c.inputs["metadata"]["name"] for c in declared.of_type(KWOK_NODE_CLASS)] == [
        "fleetplane"
    ]
    pools = by_name(declared.of_type(NODE_POOL))
    labels = pools["h100-spot"]["spec"]["template"]["metadata"]["labels"]
    # what GPU Feature Discovery would add, since no GFD runs on a fake node
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.count"] == "8"
    # nothing in a domain Karpenter refuses in a template, nor another autoscaler's labels
    assert not [k for k in labels if "kubernetes.io" in k or k.startswith("eks.amazonaws.com")]
    assert pools["h100-ondemand"]["spec"]["weight"] > pools["h100-spot"]["spec"]["weight"]


@pytest.mark.parametrize(
    ("edit", "path", "reason"),
    [
        (
            lambda raw: raw["clusters"][0].update(autoscaler="karpenter"),
            "clusters[gke].autoscaler",
            "GKE pools scale with GKE's autoscaler",
        ),
        (
            eks_all_karpenter,
            "clusters[eks].pools[h100-mig].driver_manager",
            "use driver_manager cloud",
        ),
    ],
    ids=["gke", "eks-gpu-operator"],
)
def test_the_switch_is_checked(
    edit: Callable[[dict[str, Any]], None], path: str, reason: str, fleet_from: FleetFrom
) -> None:
    with pytest.raises(ConfigError) as caught:
        fleet_from(edit)
    problems = [p for p in caught.value.problems if p.path == path]
    assert problems and reason in problems[0].reason, caught.value.problems


def test_unknown_autoscaler_is_refused(fleet_from: FleetFrom) -> None:
    with pytest.raises(ConfigError, match="'managed' or 'karpenter'"):
        fleet_from(lambda raw: raw["clusters"][0].update(autoscaler="cluster-autoscaler"))
