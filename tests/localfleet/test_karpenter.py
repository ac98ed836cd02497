"""Karpenter as a real part of the local fleet: the pinned Karpenter-kwok release beside the real
API server and kwok, scaling the fleet's Karpenter pools. Pending GPU pods of a gang bring nodes
of the pool's GPU model and capacity type, Ready (kwok's stages) and labelled as the product's
rules read them; when the pods go, the empty nodes are consolidated away."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from fleet.config import parse_fleet
from fleet.karpenter import karpenter_manifests
from localfleet.binaries import bin_dir
from localfleet.controlplane import LocalCluster
from localfleet.karpenter import (
    LocalKarpenter,
    ensure_karpenter,
    karpenter_cluster,
    stop_karpenter,
)
from localfleet.processes import alive
from tests.components.component_testkit import minimal_raw_fleet
from tests.components.test_karpenter import eks_karpenter
from tests.localfleet.karpenter_kit import (
    H100,
    ON_DEMAND,
    SPOT,
    gang,
    karpenter_nodes,
    local_fleet,
    ready,
    running_on,
)
from tests.localfleet.test_volcano import wait_for

pytestmark = pytest.mark.integration


def test_up_starts_karpenter_once_and_down_stops_it(kube: LocalCluster) -> None:
    """`fleetplane up`'s path: the CRDs and a detached Karpenter, found again by its pid file
    (a second `up` starts nothing), the NodePools left to Pulumi; `down` stops it."""
    fleet = local_fleet()
    ensure_karpenter(kube, fleet, bin_dir=bin_dir(), log=lambda message: None)
    local = karpenter_cluster(fleet)
    assert local is not None
    found = LocalKarpenter(cluster=kube, fleet=fleet, fleet_cluster=local)
    try:
        pid = found.supervisor.pid()
        assert pid is not None and alive(pid)
        assert not kube.get_json("nodepools")["items"]
        ensure_karpenter(kube, fleet, bin_dir=bin_dir(), log=lambda message: None)
        assert found.supervisor.pid() == pid
    finally:
        stop_karpenter(kube)
    assert found.supervisor.pid() is None and not alive(pid)


def test_eks_nodepools_pass_the_release_validation(kube: LocalCluster) -> None:
    """The EKS NodePools (EC2NodeClass is the AWS provider's CRD, not here) as the pinned
    release's NodePool CRD judges them: its schema and CEL rules, on a server-side dry run."""
    raw = minimal_raw_fleet()
    eks_karpenter(raw)
    fleet = parse_fleet(raw)
    pools = [m for m in karpenter_manifests(fleet, fleet.clusters[0]) if m["kind"] == "NodePool"]
    assert len(pools) == 2
    for pool in pools:
        kube.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(pool))


def test_pending_gang_brings_nodes_of_its_pool_and_empty_ones_go(
    kube: LocalCluster, karpenter: LocalKarpenter, namespace: str
) -> None:
    assert not karpenter_nodes(kube)
    kube.apply(gang(namespace, "train", 2, ON_DEMAND, spot=False))
    kube.apply(gang(namespace, "batch", 1, SPOT, spot=True))

    train = wait_for(
        "the on-demand gang running", lambda: running_on(kube, namespace, "train", 2), 180
    )
    batch = wait_for("the spot pod running", lambda: running_on(kube, namespace, "batch", 1), 180)

    on_demand = {n["metadata"]["name"]: n for n in karpenter_nodes(kube, ON_DEMAND)}
    spot = {n["metadata"]["name"]: n for n in karpenter_nodes(kube, SPOT)}
    # one 8-GPU node per 8-GPU pod, of the pool each asked for
    assert sorted(on_demand) == train and len(set(train)) == 2
    assert sorted(spot) == batch
    for node in [*on_demand.values(), *spot.values()]:
        labels = node["metadata"]["labels"]
        assert ready(node)
        assert labels["node.kubernetes.io/instance-type"] == "p5.48xlarge"
        assert labels["nvidia.com/gpu.product"] == H100
        assert labels["nvidia.com/gpu.count"] == "8"
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in node[
            "spec"
        ]["taints"]
        # registered: Karpenter took its own taint off
        assert not [t for t in node["spec"]["taints"] if t["key"].startswith("karpenter.sh/")]
    for node in on_demand.values():
        assert node["metadata"]["labels"]["karpenter.sh/capacity-type"] == "on-demand"
        assert node["metadata"]["labels"]["fleetplane.dev/capacity-type"] == "on-demand"
    for node in spot.values():
        assert node["metadata"]["labels"]["karpenter.sh/capacity-type"] == "spot"
        assert {"key": "fleetplane.dev/capacity-type", "value": "spot", "effect": "NoSchedule"} in (
            node["spec"]["taints"]
        )

    # the pods go: their empty nodes are consolidated (consolidateAfter 5 s) and deleted
    kube.kubectl("delete", "pods", "-n", namespace, "-l", "job in (train,batch)", "--wait=false")
    wait_for("Karpenter's empty nodes removed", lambda: not karpenter_nodes(kube), 180)
    assert not kube.get_json("nodeclaims")["items"]


def test_a_volcano_gang_waits_whole_then_runs_on_nodes_karpenter_brings(
    kube: LocalCluster, karpenter: LocalKarpenter, volcano: Any
) -> None:
    """The product's gangs are Volcano's: a Volcano Job of two 8-GPU members in a team queue,
    pending whole (no node of its pool exists), brings two nodes and runs on them."""
    job = f"kgang-{uuid.uuid4().hex[:6]}"
    member = gang("vt-beta", job, 1, ON_DEMAND, spot=False)[0]["spec"]
    kube.apply(
        [
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": job, "namespace": "vt-beta"},
                "spec": {
                    "minAvailable": 2,
                    "queue": "vt-beta",
                    "schedulerName": "volcano",
                    "tasks": [
                        {
                            "name": "worker",
                            "replicas": 2,
                            "template": {
                                "metadata": {"labels": {"job": job}},
                                "spec": {**member, "restartPolicy": "Never"},
                            },
                        }
                    ],
                },
            }
        ]
    )
    try:
        nodes = wait_for(
            "the Volcano gang running", lambda: running_on(kube, "vt-beta", job, 2), 240
        )
        assert len(set(nodes)) == 2
        assert {n["metadata"]["name"] for n in karpenter_nodes(kube, ON_DEMAND)} >= set(nodes)
    finally:
        kube.kubectl("delete", "jobs.batch.volcano.sh", job, "-n", "vt-beta", "--wait=false")
    wait_for("Karpenter's empty nodes removed", lambda: not karpenter_nodes(kube), 180)
