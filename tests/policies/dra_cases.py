"""The admission cases of DRA claims (issue 30 item 5): ResourceClaims and
ResourceClaimTemplates of NVIDIA's GPU DeviceClass are judged as device requests, a pod that
uses a claim the gate has no record of is refused (data.fleetplane.claims is empty in the
corpus: the Rego tests of policies/fleetplane/admission/dra_claims_test.rego judge pods with
recorded claims). Appended to tests/policies/cases.py's table, so they reach the review
corpus too."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.policies.builders import QUEUE_ANNOTATION, Json, Workload, training

GROUP, VERSION = "resource.k8s.io", "v1"
RESOURCES = {"ResourceClaim": "resourceclaims", "ResourceClaimTemplate": "resourceclaimtemplates"}
H100 = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"'


@dataclass(frozen=True)
class Claim(Workload):
    """A ResourceClaim or ResourceClaimTemplate holding a ResourceClaimSpec."""

    claim_kind: str = "ResourceClaimTemplate"
    claim_spec: Json = field(default_factory=dict)

    def object(self) -> Json:
        spec = (
            {"spec": self.claim_spec}
            if self.claim_kind == "ResourceClaimTemplate"
            else self.claim_spec
        )
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": self.claim_kind,
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": spec,
        }

    def review(self, uid: str | None = None) -> Json:
        review = super().review(uid)  # rendered as a Pod's envelope, then named for the claim
        kind = {"group": GROUP, "version": VERSION, "kind": self.claim_kind}
        request = review["request"]
        request["kind"] = request["requestKind"] = kind
        request["resource"] = {
            "group": GROUP,
            "version": VERSION,
            "resource": RESOURCES[self.claim_kind],
        }
        return review


def request(**exactly: Any) -> Json:
    return {"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", **exactly}}


def claim(kind: str, *requests: Json) -> Claim:
    return Claim(template={}, claim_kind=kind, claim_spec={"devices": {"requests": list(requests)}})


def claiming(template_name: str) -> Workload:
    """The training pod asking for its GPUs through a claim template instead of its limits."""
    return (
        training()
        .limits({})
        .no_model()
        .annotate(QUEUE_ANNOTATION, "research")
        .placed(resourceClaims=[{"name": "gpus", "resourceClaimTemplateName": template_name}])
    )


DRA_CASES: list[tuple[str, Workload, set[str]]] = [
    (
        "claim template of eight h100s",
        claim("ResourceClaimTemplate", request(count=8, selectors=[{"cel": {"expression": H100}}])),
        set(),
    ),
    (
        "claim of two gpus",
        claim("ResourceClaim", request(allocationMode="ExactCount", count=2)),
        set(),
    ),
    (
        "claim of every gpu of a node",
        claim("ResourceClaim", request(allocationMode="All")),
        {"dra-claim"},
    ),
    (
        "claim of another device class",
        claim(
            "ResourceClaimTemplate",
            {"name": "nic", "exactly": {"deviceClassName": "rdma.example.com"}},
        ),
        {"dra-claim"},
    ),
    (
        "claim of prioritized alternatives",
        claim(
            "ResourceClaim",
            {"name": "g", "firstAvailable": [{"name": "a", "deviceClassName": "gpu.nvidia.com"}]},
        ),
        {"dra-claim"},
    ),
    ("claim with admin access", claim("ResourceClaim", request(adminAccess=True)), {"dra-claim"}),
    ("pod using a claim template the gate has no record of", claiming("eight-h100"), {"dra-claim"}),
]
