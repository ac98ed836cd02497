"""Slim, read-only views of the objects a pass looks at, built from the API's JSON.

A full Pod is several kilobytes of JSON; a pass over 50,000 pods keeps only what the decisions
read (identity, labels, annotations, owner, node, accelerator demand, priority, scheduling
constraints, times). `Pod.manifest()` rebuilds a Pod-shaped dict of those fields, which is what
the OPA decision input receives.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from components import labels as keys

ACCELERATOR_RESOURCES = frozenset(keys.ACCELERATOR_RESOURCES)


def is_accelerator(resource: str) -> bool:
    return resource in ACCELERATOR_RESOURCES or resource.startswith(keys.MIG_RESOURCE_PREFIX)


def family(resource: str) -> str:
    """The device family a resource counts against (MIG devices are GPUs)."""
    return keys.GPU_RESOURCE if resource.startswith(keys.MIG_RESOURCE_PREFIX) else resource


_TIME_CACHE: dict[str, float] = {}


def parse_time(value: str | None) -> float | None:
    """RFC 3339 (as the API writes it) to epoch seconds; None stays None."""
    if not value:
        return None
    cached = _TIME_CACHE.get(value)
    if cached is None:
        cached = dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        if len(_TIME_CACHE) < 100_000:
            _TIME_CACHE[value] = cached
    return cached


def format_time(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _count(quantity: Any) -> int:
    """An accelerator quantity (always whole devices); anything else counts as 0."""
    try:
        return int(str(quantity))
    except ValueError:
        return 0


def pod_demand(spec: dict[str, Any]) -> dict[str, int]:
    """Accelerators a pod holds, per resource, with Kubernetes semantics: the larger of the app
    containers plus sidecar init containers, and the peak of any one regular init container
    (plus the sidecars started before it). Counted by limit (extended resources are allocated by
    limit; a request may only repeat it)."""

    def of(container: dict[str, Any]) -> dict[str, int]:
        resources = container.get("resources") or {}
        found = {}
        for source in (resources.get("limits") or {}, resources.get("requests") or {}):
            for resource, quantity in source.items():
                if is_accelerator(resource) and resource not in found:
                    found[resource] = _count(quantity)
        return found

    steady: dict[str, int] = {}
    for container in spec.get("containers") or ():
        for resource, n in of(container).items():
            steady[resource] = steady.get(resource, 0) + n
    sidecars: dict[str, int] = {}
    peaks: dict[str, int] = {}
    for container in spec.get("initContainers") or ():
        counts = of(container)
        if container.get("restartPolicy") == "Always":
            for resource, n in counts.items():
                sidecars[resource] = sidecars.get(resource, 0) + n
                steady[resource] = steady.get(resource, 0) + n
        else:
            for resource, n in counts.items():
                peaks[resource] = max(peaks.get(resource, 0), n + sidecars.get(resource, 0))
    demand = {r: max(steady.get(r, 0), peaks.get(r, 0)) for r in set(steady) | set(peaks)}
    return {r: n for r, n in demand.items() if n > 0}


@dataclass(frozen=True, slots=True)
class OwnerRef:
    api_version: str
    kind: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Pod:
    namespace: str
    name: str
    uid: str
    resource_version: str
    labels: dict[str, str]
    annotations: dict[str, str]
    owner: OwnerRef | None
    node_name: str | None
    phase: str
    priority: int
    priority_class: str | None
    demand: dict[str, int]
    created: float
    started: float | None
    finished: float | None
    deleting: bool
    unschedulable_since: float | None
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, Any], ...] = ()
    required_affinity: tuple[dict[str, Any], ...] = ()
    grace_seconds: int | None = None
    containers: tuple[dict[str, Any], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def devices(self) -> int:
        return sum(self.demand.values())

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def workload_type(self) -> str | None:
        return self.labels.get(keys.WORKLOAD_TYPE)

    @property
    def exempt(self) -> bool:
        return self.labels.get(keys.EXEMPT) == "true"

    def manifest(self) -> dict[str, Any]:
        """A Pod-shaped dict of the fields kept: the `pod` of an OPA decision input."""
        metadata: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
        }
        if self.owner:
            metadata["ownerReferences"] = [
                {
                    "apiVersion": self.owner.api_version,
                    "kind": self.owner.kind,
                    "name": self.owner.name,
                    "uid": self.owner.uid,
                    "controller": True,
                }
            ]
        spec: dict[str, Any] = {"containers": [dict(c) for c in self.containers]}
        if self.node_name:
            spec["nodeName"] = self.node_name
        if self.priority_class:
            spec["priorityClassName"] = self.priority_class
        spec["priority"] = self.priority
        if self.node_selector:
            spec["nodeSelector"] = dict(self.node_selector)
        if self.tolerations:
            spec["tolerations"] = [dict(t) for t in self.tolerations]
        status: dict[str, Any] = {"phase": self.phase}
        if self.started is not None:
            status["startTime"] = format_time(self.started)
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": spec,
            "status": status,
        }


def _controller_owner(metadata: dict[str, Any]) -> OwnerRef | None:
    for ref in metadata.get("ownerReferences") or ():
        if ref.get("controller"):
            return OwnerRef(
                ref.get("apiVersion", ""), ref.get("kind", ""), ref["name"], ref.get("uid", "")
            )
    return None


def _slim_container(container: dict[str, Any]) -> dict[str, Any]:
    slim: dict[str, Any] = {"name": container.get("name", "")}
    if container.get("image"):
        slim["image"] = container["image"]
    resources = container.get("resources")
    if resources:
        slim["resources"] = resources
    return slim


def accelerator_pod_from_api(raw: dict[str, Any]) -> Pod | None:
    """The slim view of a pod that holds or requests accelerators; None (cheaply) for others."""
    spec = raw.get("spec") or {}
    demand = pod_demand(spec)
    return pod_from_api(raw, demand) if demand else None


def pod_from_api(raw: dict[str, Any], demand: dict[str, int] | None = None) -> Pod:
    metadata = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    unschedulable_since = None
    scheduled_at = None
    for condition in status.get("conditions") or ():
        if condition.get("type") == "PodScheduled":
            if condition.get("status") == "False" and condition.get("reason") == "Unschedulable":
                unschedulable_since = parse_time(condition.get("lastTransitionTime")) or parse_time(
                    metadata.get("creationTimestamp")
                )
            elif condition.get("status") == "True":
                scheduled_at = parse_time(condition.get("lastTransitionTime"))
    phase = status.get("phase") or "Pending"
    finished = None
    if phase in ("Succeeded", "Failed"):
        ends = [
            parse_time(((s.get("state") or {}).get("terminated") or {}).get("finishedAt"))
            for s in status.get("containerStatuses") or ()
        ]
        known = [e for e in ends if e is not None]
        finished = max(known) if known else None
    affinity = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or ()
    return Pod(
        namespace=metadata.get("namespace", ""),
        name=metadata.get("name", ""),
        uid=metadata.get("uid", ""),
        resource_version=metadata.get("resourceVersion", ""),
        labels=metadata.get("labels") or {},
        annotations=metadata.get("annotations") or {},
        owner=_controller_owner(metadata),
        node_name=spec.get("nodeName"),
        phase=phase,
        priority=int(spec.get("priority") or 0),
        priority_class=spec.get("priorityClassName"),
        demand=pod_demand(spec) if demand is None else demand,
        created=parse_time(metadata.get("creationTimestamp")) or 0.0,
        started=parse_time(status.get("startTime")) or scheduled_at,
        finished=finished,
        deleting=bool(metadata.get("deletionTimestamp")),
        unschedulable_since=unschedulable_since if not spec.get("nodeName") else None,
        node_selector=spec.get("nodeSelector") or {},
        tolerations=tuple(spec.get("tolerations") or ()),
        required_affinity=tuple(affinity),
        grace_seconds=spec.get("terminationGracePeriodSeconds"),
        containers=tuple(_slim_container(c) for c in spec.get("containers") or ()),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    name: str
    labels: dict[str, str]
    allocatable: dict[str, int]
    taints: tuple[dict[str, Any], ...]
    ready: bool
    unschedulable: bool

    @property
    def accelerators(self) -> dict[str, int]:
        return {r: n for r, n in self.allocatable.items() if is_accelerator(r) and n > 0}

    @property
    def capacity_type(self) -> str:
        """spot or on-demand, from the project's label or the cloud's."""
        found = self.labels.get(keys.CAPACITY_TYPE)
        if found in ("spot", "on-demand"):
            return found
        for label, spot_value in keys.SPOT_NODE_LABELS.items():
            if self.labels.get(label) == spot_value:
                return "spot"
        return "on-demand"


def node_from_api(raw: dict[str, Any]) -> Node:
    metadata = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    allocatable = {
        r: _count(q) for r, q in (status.get("allocatable") or {}).items() if is_accelerator(r)
    }
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )
    return Node(
        name=metadata.get("name", ""),
        labels=metadata.get("labels") or {},
        allocatable=allocatable,
        taints=tuple(spec.get("taints") or ()),
        ready=ready,
        unschedulable=bool(spec.get("unschedulable")),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Namespace:
    name: str
    uid: str
    resource_version: str
    labels: dict[str, str]
    annotations: dict[str, str]


def namespace_from_api(raw: dict[str, Any]) -> Namespace:
    metadata = raw.get("metadata") or {}
    return Namespace(
        name=metadata.get("name", ""),
        uid=metadata.get("uid", ""),
        resource_version=metadata.get("resourceVersion", ""),
        labels=metadata.get("labels") or {},
        annotations=metadata.get("annotations") or {},
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DisruptionBudget:
    namespace: str
    name: str
    selector: dict[str, Any]
    disruptions_allowed: int

    def selects(self, pod: Pod) -> bool:
        return pod.namespace == self.namespace and selector_matches(self.selector, pod.labels)


def pdb_from_api(raw: dict[str, Any]) -> DisruptionBudget:
    metadata = raw.get("metadata") or {}
    return DisruptionBudget(
        namespace=metadata.get("namespace", ""),
        name=metadata.get("name", ""),
        selector=(raw.get("spec") or {}).get("selector") or {},
        disruptions_allowed=int((raw.get("status") or {}).get("disruptionsAllowed") or 0),
    )


def selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector; an empty selector matches everything (as for a PDB)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or ():
        key, operator = expression.get("key"), expression.get("operator")
        values = expression.get("values") or []
        present = key in labels
        if operator == "In" and (not present or labels[key] not in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True
