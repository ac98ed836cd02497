"""DRA claim records end to end (issue 30 item 5): a real kube-apiserver serving
resource.k8s.io/v1 and a real OPA run as the gate's. A pod that uses a ResourceClaimTemplate is
refused while the gate has no record of it, and judged with the template's GPUs once the
admission concern has published the record (`data.fleetplane.claims`): admitted within the
training type's maximum, refused beyond it. A claim's allocation, as the scheduler writes it,
counts for the pods it is reserved for (observe/dra_claims.py `claimed_devices`)."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import pytest

from controller.config import parse_config
from controller.observe.dra_claims import ClaimObject, claim_from_api, claimed_devices
from controller.observe.kube import KubeClient, object_path
from controller.reconcile import run_pass
from localfleet.controlplane import LocalCluster
from tests.controller.conftest import gate_opa, gate_settings, research_home_config
from tests.controller.test_admission_data import ask, read
from tests.policies.dra_cases import H100, claiming

SPEC = {
    "devices": {
        "requests": [
            {
                "name": "gpus",
                "exactly": {
                    "deviceClassName": "gpu.nvidia.com",
                    "allocationMode": "ExactCount",
                    "count": 8,
                    "selectors": [{"cel": {"expression": H100}}],
                },
            }
        ]
    }
}


@pytest.mark.integration
def test_the_gate_judges_claims_by_the_records_the_controller_writes(
    kube: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    config = research_home_config(namespace)
    client = KubeClient.from_kubeconfig(str(kube.kubeconfig))
    client.create(
        object_path("resource.k8s.io/v1", "resourceclaimtemplates", namespace, None),
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "eight-h100"},
            "spec": {"spec": SPEC},
        },
    )
    opa = gate_opa(tmp_path, config)
    opa.start()
    settings = gate_settings(opa, tmp_path, namespace, kept=False)
    # a training pod whose GPUs come from the template (no limit, no model selector)
    review = claiming("eight-h100").in_namespace(namespace).review()
    try:
        unknown = ask(opa, review)
        assert not unknown.allowed and unknown.says("of which the gate has no record")

        summary = run_pass(
            kube=client,
            fleet=parse_config(config),
            settings=settings,
            concerns=("spend", "admission"),
            now=time.time(),
            out=io.StringIO(),
        )
        assert not summary.errors, summary.as_dict()
        records = read(opa, f"fleetplane/claims/{namespace}")
        assert records == {"resourceclaimtemplates/eight-h100": SPEC}
        assert ask(opa, review).allowed
        # 9 pods of the template's 8 GPUs: over the training type's 64, as with nvidia.com/gpu
        nine = claiming("eight-h100").in_namespace(namespace).as_deployment(replicas=9).review()
        refused = ask(opa, nine)
        assert not refused.allowed and "max-accelerators" in refused.rules, refused.messages
    finally:
        opa.stop()


def test_allocated_claims_count_for_the_pods_they_are_reserved_for() -> None:
    def claim(name: str, results: list[dict[str, Any]], pods: list[str]) -> ClaimObject:
        return claim_from_api(
            "ResourceClaim",
            {
                "metadata": {"name": name, "namespace": "ml-research"},
                "spec": SPEC,
                "status": {
                    "allocation": {"devices": {"results": results}},
                    "reservedFor": [{"resource": "pods", "name": p, "uid": p} for p in pods],
                },
            },
        )

    gpu = {"request": "gpus", "driver": "gpu.nvidia.com", "pool": "node-1", "device": "gpu-0"}
    nic = {"request": "nic", "driver": "rdma.example.com", "pool": "node-1", "device": "nic-0"}
    claims = [
        claim("two", [gpu, {**gpu, "device": "gpu-1"}, nic], ["pod-a"]),
        claim("shared", [gpu], ["pod-a", "pod-b"]),
        claim("pending", [], ["pod-c"]),
    ]
    assert claimed_devices(claims) == {"pod-a": 3, "pod-b": 1}
    assert claims[0].record_key == "resourceclaims/two"
    template = claim_from_api(
        "ResourceClaimTemplate",
        {"metadata": {"name": "t", "namespace": "ml-research"}, "spec": {"spec": SPEC}},
    )
    assert template.spec == SPEC and template.record_key == "resourceclaimtemplates/t"
