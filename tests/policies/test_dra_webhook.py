"""DRA through the real path (issue 30 item 5): the pinned API server accepts a container
limit on `deviceclass.resource.kubernetes.io/gpu.nvidia.com`, ResourceClaimTemplates
(resource.k8s.io/v1) and pods that use them, and calls the gate's webhook on a real OPA, which
counts them as GPUs. The implicit resource shares the gated namespace of test_kinds_webhook
(one OPA, one webhook); the claims have a namespace of their own whose claim records
(data.fleetplane.claims) the test writes as the controller would."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localfleet.controlplane import LocalCluster
from tests.policies.test_kinds_webhook import create, gated, template
from tests.policies.webhook_gate import gated_namespace

pytestmark = pytest.mark.integration

__all__ = ["gated"]  # the fixture, imported for pytest

DRA_GPU = "deviceclass.resource.kubernetes.io/gpu.nvidia.com"


def deployment(name: str, replicas: int, pod: dict[str, Any]) -> dict[str, Any]:
    pod["metadata"]["labels"]["app"] = name
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": pod,
        },
    }


def dra_deployment(name: str, replicas: int) -> dict[str, Any]:
    pod = template(8)
    pod["spec"]["containers"][0]["resources"] = {"limits": {DRA_GPU: "8"}}
    return deployment(name, replicas, pod)


def test_dra_gpus_are_counted_by_the_gate(kube: LocalCluster, gated: str) -> None:
    admitted = create(kube, gated, dra_deployment("dra-small", replicas=1))
    assert admitted.returncode == 0, admitted.stderr
    # 9 replicas x 8 GPUs through the DRA class: over the training type's maximum, as the
    # same Deployment asking for nvidia.com/gpu is (before, the gate saw no accelerator).
    refused = create(kube, gated, dra_deployment("dra-large", replicas=9))
    assert refused.returncode != 0
    assert "admission.fleetplane.dev" in refused.stderr
    assert "max-accelerators" in refused.stderr


H100 = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"'


def claim_spec(count: int, mode: str = "ExactCount") -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.nvidia.com", "allocationMode": mode}
    if mode == "ExactCount":
        exactly |= {"count": count, "selectors": [{"cel": {"expression": H100}}]}
    return {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}


def claim_template(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": spec},
    }


def claiming_deployment(name: str, replicas: int, template_name: str) -> dict[str, Any]:
    """8 GPUs per pod through a claim template: no GPU limit, no model selector."""
    pod = template(0)
    pod["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": template_name}]
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpus"}]}
    return deployment(name, replicas, pod)


@pytest.fixture(scope="module")
def claims_gated(kube: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A gated namespace whose records hold the template eight-h100 (8 H100s), as the
    controller publishes them (docs/contracts.md `data.fleetplane.claims`)."""

    def records(namespace: str) -> dict[str, Any]:
        return {
            "fleetplane/claims": {
                namespace: {"resourceclaimtemplates/eight-h100": claim_spec(8)},
            }
        }

    work: Path = tmp_path_factory.mktemp("dra-claims")
    with gated_namespace(kube, work, "dra", data=records) as namespace:
        yield namespace


def test_claim_templates_are_judged_as_device_requests(
    kube: LocalCluster, claims_gated: str
) -> None:
    admitted = create(kube, claims_gated, claim_template("eight-h100", claim_spec(8)))
    assert admitted.returncode == 0, admitted.stderr
    refused = create(kube, claims_gated, claim_template("every-gpu", claim_spec(0, mode="All")))
    assert refused.returncode != 0
    assert "dra-claim" in refused.stderr and "allocationMode All" in refused.stderr


def test_pods_using_a_claim_are_judged_with_what_it_holds(
    kube: LocalCluster, claims_gated: str
) -> None:
    admitted = create(kube, claims_gated, claiming_deployment("claims-small", 1, "eight-h100"))
    assert admitted.returncode == 0, admitted.stderr
    # 9 pods x the template's 8 GPUs: over the training type's maximum, as 9 x 8 nvidia.com/gpu.
    refused = create(kube, claims_gated, claiming_deployment("claims-large", 9, "eight-h100"))
    assert refused.returncode != 0
    assert "max-accelerators" in refused.stderr
    # A template the gate has no record of: refused, with what to do.
    unknown = create(kube, claims_gated, claiming_deployment("claims-unknown", 1, "unknown"))
    assert unknown.returncode != 0
    assert "of which the gate has no record" in unknown.stderr
