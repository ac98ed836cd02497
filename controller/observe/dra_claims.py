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

from dataclasses import dataclass, replace
from typing import Any

from controller.observe.json_fields import (
    array_field,
    decoding,
    object_field,
    plain,
    root_sections,
    string_field,
)
from controller.observe.model import Pod, controller_owner
from fleet import labels

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
    requested_gpus: int = 0
    """GPUs its requests ask for (ExactCount requests of the GPU class; All counts none)."""
    owner_pod: str | None = None
    """The uid of the pod that owns it (a claim made from the pod's template), else None."""

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
        owner = controller_owner(metadata)
        return ClaimObject(
            kind=kind,
            namespace=string_field(metadata, "namespace", "metadata"),
            name=string_field(metadata, "name", "metadata"),
            spec=plain(spec),
            requested_gpus=_requested_gpus(spec),
            owner_pod=owner.uid if owner is not None and owner.kind == "Pod" else None,
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


def _requested_gpus(spec: Any) -> int:
    total = 0
    for request in array_field(object_field(spec, "devices", "spec"), "requests", "spec.devices"):
        exactly = object_field(request, "exactly", "spec.devices.requests[]")
        if (
            exactly.get("deviceClassName") == GPU_DRIVER
            and exactly.get("allocationMode", "ExactCount") == "ExactCount"
        ):
            count = exactly.get("count", 1)
            total += count if isinstance(count, int) and not isinstance(count, bool) else 0
    return total


def claimed_devices(claims: list[ClaimObject]) -> dict[str, int]:
    """Pod uid -> the GPUs the pod holds or waits for through DRA claims, which its container
    limits do not show: an allocated claim's GPUs for each pod it is reserved for (a claim
    shared by several pods counts for each: each holds them while it runs), and a claim not
    yet allocated that a pod owns (made from the pod's template) for what it requests, so a
    pending pod's demand is known before the scheduler places it."""
    held: dict[str, int] = {}
    for claim in claims:
        if claim.kind != "ResourceClaim":
            continue
        if claim.allocated_gpus:
            for uid in claim.reserved_for:
                held[uid] = held.get(uid, 0) + claim.allocated_gpus
        elif claim.owner_pod is not None and claim.requested_gpus:
            held[claim.owner_pod] = held.get(claim.owner_pod, 0) + claim.requested_gpus
    return held


CLAIMED_RESOURCE = f"deviceclass.resource.kubernetes.io/{GPU_DRIVER}"
"""The implicit extended resource of the GPU DeviceClass: the name under which the gate
(policies/fleetplane/lib/dra_claims.rego) and the decision policies count claimed GPUs."""


def with_claimed_devices(pods: list[Pod], claims: list[ClaimObject]) -> list[Pod]:
    """The snapshot's accelerator pods with their claimed GPUs, the one place idle evidence,
    spend and preemption learn of them: in `demand` as nvidia.com/gpu (a claim of the GPU class
    is a GPU of the node's model), and in the view's first container as the class's implicit
    extended resource, which the decision policies read from the pod's manifest
    (workloads.pod_demand, priced as nvidia.com/gpu); a limit the pod set on that resource
    itself is replaced, its devices being in the claim the scheduler made for it. A pod kept
    for its claims that claims no GPU is dropped, as the snapshot drops every pod without
    accelerators."""
    held = claimed_devices(claims)
    out: list[Pod] = []
    for pod in pods:
        claimed = held.get(pod.uid, 0)
        if claimed:
            demand = dict(pod.demand)
            demand[labels.GPU_RESOURCE] = demand.get(labels.GPU_RESOURCE, 0) + claimed
            out.append(replace(pod, demand=demand, containers=_claiming(pod.containers, claimed)))
        elif pod.demand:
            out.append(pod)
    return out


def _claiming(containers: tuple[dict[str, Any], ...], claimed: int) -> tuple[dict[str, Any], ...]:
    slim = []
    for index, container in enumerate(containers):
        resources = dict(container.get("resources") or {})
        limits = {k: v for k, v in (resources.get("limits") or {}).items() if k != CLAIMED_RESOURCE}
        if index == 0:
            limits[CLAIMED_RESOURCE] = str(claimed)
        slim.append({**container, "resources": {**resources, "limits": limits}})
    return tuple(slim)
