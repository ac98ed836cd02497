"""The node view every workflow decides on: the facts of a node that no workflow owns (labels,
cordon, readiness, taints, GPUs, driver). A mode adds its own state to it (`state.StateKeys`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleet import labels as keys


def driver_version(labels: dict[str, str]) -> str | None:
    """The driver the node runs, as GPU feature discovery reports it: major.minor[.rev]."""
    major = labels.get(keys.CUDA_DRIVER_MAJOR)
    minor = labels.get(keys.CUDA_DRIVER_MINOR)
    if not major or not minor:
        return None
    rev = labels.get(keys.CUDA_DRIVER_REV)
    return f"{major}.{minor}.{rev}" if rev else f"{major}.{minor}"


def _count(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


@dataclass(frozen=True, kw_only=True)
class NodeView:
    name: str
    pool: str
    labels: dict[str, str]
    annotations: dict[str, str]
    resource_version: str
    unschedulable: bool
    ready: bool
    taints: tuple[dict[str, Any], ...]
    gpu_capacity: int
    gpu_allocatable: int
    driver: str | None

    def manifest(self) -> dict[str, Any]:
        """A Node-shaped dict of the fields kept: the `node` of an OPA decision input."""
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": dict(self.labels),
                "annotations": dict(self.annotations),
            },
            "spec": {"unschedulable": self.unschedulable, "taints": [dict(t) for t in self.taints]},
        }


def node_fields(raw: dict[str, Any]) -> dict[str, Any]:
    """The `NodeView` fields of a node as the API returns it (for views that add their own)."""
    metadata = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    labels = metadata.get("labels") or {}
    capacity = status.get("capacity") or {}
    allocatable = status.get("allocatable") or {}
    gpus = _count(capacity.get(keys.GPU_RESOURCE, 0)) or _count(labels.get(keys.GPU_COUNT, 0))
    return {
        "name": metadata.get("name", ""),
        "pool": labels.get(keys.POOL, ""),
        "labels": labels,
        "annotations": metadata.get("annotations") or {},
        "resource_version": metadata.get("resourceVersion", ""),
        "unschedulable": bool(spec.get("unschedulable")),
        "ready": any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or ()
        ),
        "taints": tuple(spec.get("taints") or ()),
        "gpu_capacity": gpus,
        "gpu_allocatable": _count(allocatable.get(keys.GPU_RESOURCE, 0)),
        "driver": driver_version(labels),
    }


def node_view(raw: dict[str, Any]) -> NodeView:
    return NodeView(**node_fields(raw))
