"""DRA on the local fleet (issue 30 item 5): the fake GPU nodes publish the ResourceSlices
NVIDIA's DRA driver would (localfleet/dra_slices.py), and the pinned kube-scheduler allocates a
pod's claim from them: the claim made from the pod's ResourceClaimTemplate (by
kube-controller-manager's resourceclaim controller) is allocated two H100s of the node the pod
is bound to, reserved for the pod, and kwok runs it. The controller's snapshot (pods listed as
protobuf) keeps the pod, which has no GPU limit, and counts the claim's GPUs in its demand."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from controller.observe.dra_claims import CLAIM_APIS, claim_from_api, claimed_devices
from controller.observe.kube import KubeClient
from controller.observe.snapshot import take_snapshot
from localfleet.controlplane import LocalCluster
from localfleet.dra_slices import DRIVER
from localfleet.fakenodes import default_pools, fake_nodes

pytestmark = pytest.mark.integration

H100 = f"device.attributes['{DRIVER}'].productName == 'NVIDIA H100 80GB HBM3'"


def test_fake_gpu_nodes_publish_the_driver_s_slices(kube: LocalCluster) -> None:
    slices = kube.get_json("resourceslices")["items"]
    nodes = {n["metadata"]["name"]: n for n in kube.get_json("nodes")["items"]}
    # the session's cluster also holds nodes other tests made (Karpenter's, their own fakes):
    # every GPU node of the fixture's fleet publishes a slice, and no slice names a node
    # without GPUs
    fleet_gpu_nodes = {
        n["metadata"]["name"]
        for n in fake_nodes(default_pools())
        if "nvidia.com/gpu" in n["status"]["capacity"]
    }
    published = {s["spec"]["nodeName"] for s in slices}
    assert fleet_gpu_nodes and fleet_gpu_nodes <= published
    for name in published & set(nodes):
        assert "nvidia.com/gpu" in nodes[name]["status"].get("capacity", {}), name
    device = slices[0]["spec"]["devices"][0]
    assert {
        "type",
        "uuid",
        "productName",
        "brand",
        "architecture",
        "cudaComputeCapability",
        "driverVersion",
        "cudaDriverVersion",
        "pcieBusID",
    } <= set(device["attributes"])
    assert "memory" in device["capacity"]
    assert kube.get_json("deviceclass", DRIVER)["metadata"]["name"] == DRIVER


def _pod(template: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer"},
        "spec": {
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": template}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "resources": {"claims": [{"name": "gpus"}]},
                }
            ],
        },
    }


def test_the_scheduler_allocates_a_claim_on_a_fake_gpu_node(
    kube: LocalCluster, namespace: str
) -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "two-h100"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpus",
                            "exactly": {
                                "deviceClassName": DRIVER,
                                "count": 2,
                                "selectors": [{"cel": {"expression": H100}}],
                            },
                        }
                    ]
                }
            }
        },
    }
    for obj in (template, _pod("two-h100")):
        kube.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(obj))

    def pod() -> dict[str, Any]:
        return kube.get_json("pod", "trainer", "-n", namespace)

    kube.wait_until(
        "the pod with a claim Running on a fake GPU node",
        lambda: pod()["status"].get("phase") == "Running",
        time.monotonic() + 90,
    )
    running = pod()
    node = kube.get_json("node", running["spec"]["nodeName"])
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    claims = kube.get_json("resourceclaims", "-n", namespace)["items"]
    assert len(claims) == 1
    allocation = claims[0]["status"]["allocation"]["devices"]["results"]
    assert len(allocation) == 2
    assert {r["driver"] for r in allocation} == {DRIVER}
    assert {r["pool"] for r in allocation} == {running["spec"]["nodeName"]}
    reserved = claims[0]["status"]["reservedFor"]
    assert [r["uid"] for r in reserved] == [running["metadata"]["uid"]]

    # the controller's observer counts the claim's GPUs for the pod
    client = KubeClient.from_kubeconfig(str(kube.kubeconfig))
    observed = client.list_objects(
        CLAIM_APIS["ResourceClaim"][1], lambda raw: claim_from_api("ResourceClaim", raw)
    )
    held = claimed_devices([c for c in observed if c.namespace == namespace])
    assert held == {running["metadata"]["uid"]: 2}
    snapshot = take_snapshot(client)
    (seen,) = [p for p in snapshot.pods if p.uid == running["metadata"]["uid"]]
    assert seen.demand == {"nvidia.com/gpu": 2}
    assert seen.node_name == running["spec"]["nodeName"]


def test_volcano_allocates_a_claim_of_a_pod_it_schedules(kube: LocalCluster, volcano: Any) -> None:
    """Volcano 1.15's predicates plugin runs the upstream DynamicResources plugin (filter,
    reserve, pre-bind) when the DynamicResourceAllocation feature gate is on, as it is by default
    in the Kubernetes it vendors: the pinned vc-scheduler allocates the claim of a pod of a team
    namespace (scheduled by Volcano) as kube-scheduler does."""
    namespace = "vt-beta"
    name = f"dra-{uuid.uuid4().hex[:6]}"
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "gpus", "exactly": {"deviceClassName": DRIVER, "count": 2}}
                    ]
                }
            }
        },
    }
    pod = _pod(name)
    pod["metadata"] = {
        "name": name,
        "annotations": {"scheduling.volcano.sh/queue-name": "vt-beta"},
    }
    try:
        for obj in (template, pod):
            kube.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(obj))

        def placed() -> dict[str, Any]:
            return kube.get_json("pod", name, "-n", namespace)

        kube.wait_until(
            "a Volcano-scheduled pod with a claim Running",
            lambda: placed()["status"].get("phase") == "Running",
            time.monotonic() + 120,
        )
        running = placed()
        assert running["spec"]["schedulerName"] == "volcano"
        claims = [
            c
            for c in kube.get_json("resourceclaims", "-n", namespace)["items"]
            if any(o["uid"] == running["metadata"]["uid"] for o in c["metadata"]["ownerReferences"])
        ]
        (claim,) = claims
        results = claim["status"]["allocation"]["devices"]["results"]
        assert len(results) == 2 and {r["pool"] for r in results} == {running["spec"]["nodeName"]}
        assert [r["uid"] for r in claim["status"]["reservedFor"]] == [running["metadata"]["uid"]]
    finally:
        kube.kubectl("delete", "pod", name, "-n", namespace, "--wait=false", check=False)
        kube.kubectl(
            "delete", "resourceclaimtemplate", name, "-n", namespace, "--wait=false", check=False
        )
