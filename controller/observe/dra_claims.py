"""DRA claims and claim templates (resource.k8s.io/v1, the version the pinned Kubernetes
serves), as a pass reads them.

Two readers need them: the gate, which judges a pod that uses a claim with what the claim
holds and reads it from records the controller publishes (docs/contracts.md
`data.fleetplane.claims`, controller/decide/claim_records.py), and the controller's own
accounting of the GPUs a pod holds through its allocated claims (`claimed_devices`). A
ResourceClaimSpec is immutable once written, so the record of one stays true for the object's
life.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.observe.json_fields import (
    array_field,
    decoding,
    object_field,
    plain,
    root_sections,
    string_field,
)

GPU_DRIVER = "gpu.nvidia.com"
"""The driver (and DeviceClass) of NVIDIA's DRA driver for GPUs: its allocated devices are GPUs."""

CLAIM_APIS = {
    "ResourceClaim": ("resourceclaims", "/apis/resource.k8s.io/v1/resourceclaims"),
    "ResourceClaimTemplate": (
        "resourceclaimtemplates",
        "/apis/resource.k8s.io/v1/resourceclaimtemplates",
    ),
}
"""kind -> (resource, list path)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimObject:
    """A ResourceClaim or ResourceClaimTemplate: its ResourceClaimSpec (a template's
    spec.spec) and, for a claim, the GPUs allocated to it and the pods it is reserved for."""

    kind: str
    namespace: str
    name: str
    spec: dict[str, Any]
    allocated_gpus: int = 0
    """Devices of NVIDIA's GPU driver in status.allocation (0 before the scheduler allocates)."""
    reserved_for: tuple[str, ...] = ()
    """The uids of the pods in status.reservedFor."""

    @property
    def record_key(self) -> str:
        """Its key in data.fleetplane.claims[namespace] (the gate's `claims.record_key`)."""
        return f"{CLAIM_APIS[self.kind][0]}/{self.name}"


def claim_from_api(kind: str, raw: Any) -> ClaimObject:
    """The view of a listed claim or template of `kind` (a key of CLAIM_APIS); DecodeError
    naming the object and the field when one it reads has the wrong type."""

    def convert() -> ClaimObject:
        metadata, spec, status = root_sections(raw)
        if kind == "ResourceClaimTemplate":
            spec = object_field(spec, "spec", "spec")
        allocation = object_field(status, "allocation", "status")
        results = array_field(
            object_field(allocation, "devices", "status.allocation"),
            "results",
            "status.allocation.devices",
        )
        reserved = array_field(status, "reservedFor", "status")
        return ClaimObject(
            kind=kind,
            namespace=string_field(metadata, "namespace", "metadata"),
            name=string_field(metadata, "name", "metadata"),
            spec=plain(spec),
            allocated_gpus=sum(
                1
                for result in results
                if string_field(result, "driver", "status.allocation.devices.results") == GPU_DRIVER
            ),
            reserved_for=tuple(
                uid
                for entry in reserved
                if (uid := string_field(entry, "uid", "status.reservedFor"))
                and string_field(entry, "resource", "status.reservedFor") == "pods"
            ),
        )

    return decoding(kind, raw, convert)


def claimed_devices(claims: list[ClaimObject]) -> dict[str, int]:
    """Pod uid -> the GPUs allocated to the claims reserved for it: the devices a pod holds
    through DRA, which its container limits do not show. A claim shared by several pods counts
    for each (each holds the devices while it runs)."""
    held: dict[str, int] = {}
    for claim in claims:
        if claim.kind != "ResourceClaim" or not claim.allocated_gpus:
            continue
        for uid in claim.reserved_for:
            held[uid] = held.get(uid, 0) + claim.allocated_gpus
    return held
