"""Slim, read-only views of the objects a pass looks at, built from the API's JSON.

A full Pod is several kilobytes of JSON; a pass over 50,000 pods keeps only what the decisions
read (identity, labels, annotations, owner, node, accelerator demand, priority, scheduling
constraints, times). `Pod.manifest()` rebuilds a Pod-shaped dict of those fields, which is what
the OPA decision input receives.

The `*_from_api` functions read only those fields, through `.get`, `[]` and iteration, so they
take either plain dicts (orjson, the tests) or the lazy objects of `simdjson` that
`KubeClient.list_objects` hands out (nothing else of a listed object is ever turned into Python
objects). What a view keeps is copied out as plain dicts, lists and strings (`plain`). A field
of the wrong JSON type raises `DecodeError`, naming the object and the field: an object the
controller cannot read is never acted upon, and the pass stops before deciding anything.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.observe.facts import PodFacts, owner_of
from controller.observe.json_fields import (
    JSON_OBJECTS,
    DecodeError,
    array_field,
    decoding,
    integer_field,
    json_type,
    object_field,
    object_list,
    plain,
    root_sections,
    string_field,
    string_map_field,
)
from controller.views import view
from fleet import labels as keys

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


_FORMATTED: dict[float, str] = {}


def format_time(epoch: float) -> str:
    """Epoch seconds as the API writes them. Remembered like `parse_time`: the pods of a fleet
    share few start times, and a pass formats one per pod (the decision inputs' manifests)."""
    found = _FORMATTED.get(epoch)
    if found is None:
        found = dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if len(_FORMATTED) < 100_000:
            _FORMATTED[epoch] = found
    return found


def _count(quantity: Any) -> int:
    """An accelerator quantity (always whole devices); anything else counts as 0."""
    try:
        return int(str(quantity))
    except ValueError:
        return 0


def pod_demand(spec: Any) -> dict[str, int]:
    """Accelerators a pod holds, per resource, with Kubernetes semantics: the larger of the app
    containers plus sidecar init containers, and the peak of any one regular init container
    (plus the sidecars started before it). Counted by limit (extended resources are allocated by
    limit; a request may only repeat it)."""

    def of(container: Any) -> dict[str, int]:
        resources = object_field(container, "resources", "spec.containers[]")
        found: dict[str, int] = {}
        if not resources:
            return found
        for key in ("limits", "requests"):
            source = resources.get(key)
            if not source:
                continue
            if not isinstance(source, JSON_OBJECTS):
                raise DecodeError(
                    f"spec.containers[].resources.{key}: expected an object, got {json_type(source)}"
                )
            for resource in source:
                if resource not in found and (
                    resource in ACCELERATOR_RESOURCES
                    or resource.startswith(keys.MIG_RESOURCE_PREFIX)
                ):
                    found[resource] = _count(source[resource])
        return found

    return effective_demand(
        [of(c) for c in array_field(spec, "containers", "spec")],
        [
            (of(c), c.get("restartPolicy") == "Always")
            for c in array_field(spec, "initContainers", "spec")
        ],
    )


def effective_demand(
    app: Sequence[dict[str, int]], init: Sequence[tuple[dict[str, int], bool]]
) -> dict[str, int]:
    """Kubernetes' effective request from per-container counts: the sum of the app containers
    and sidecars (init containers with restartPolicy Always, `init` pairs marked True), or the
    peak of one regular init container plus the sidecars started before it, whichever is larger
    (zeros dropped). Shared by the JSON and the protobuf views."""
    if len(app) == 1 and not init:
        # Most pods: one container, whose counts are the demand.
        return {r: n for r, n in app[0].items() if n > 0}
    steady: dict[str, int] = {}
    for counts in app:
        for resource, n in counts.items():
            steady[resource] = steady.get(resource, 0) + n
    sidecars: dict[str, int] = {}
    peaks: dict[str, int] = {}
    for counts, sidecar in init:
        if sidecar:
            for resource, n in counts.items():
                sidecars[resource] = sidecars.get(resource, 0) + n
                steady[resource] = steady.get(resource, 0) + n
        else:
            for resource, n in counts.items():
                peaks[resource] = max(peaks.get(resource, 0), n + sidecars.get(resource, 0))
    if peaks:
        steady = {r: max(steady.get(r, 0), peaks.get(r, 0)) for r in set(steady) | set(peaks)}
    return {r: n for r, n in steady.items() if n > 0}


@dataclass(frozen=True, slots=True)
class OwnerRef:
    api_version: str
    kind: str
    name: str
    uid: str


@view
class Pod(PodFacts):
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
    # Required pod (anti-)affinity: placement by other pods, which preemption does not model.
    required_pod_affinity: bool = False
    grace_seconds: int | None = None
    containers: tuple[dict[str, Any], ...] = ()
    active_deadline_seconds: int | None = None

    def __post_init__(self) -> None:
        # The pod's own facts (observe.facts.PodFacts), worked out once: every concern reads
        # them. A view is not frozen at run time (controller.views), only for the type checker.
        labels = self.labels
        setattr_ = object.__setattr__
        setattr_(self, "devices", sum(self.demand.values()))
        setattr_(self, "terminal", self.phase in ("Succeeded", "Failed"))
        setattr_(self, "workload_type", labels.get(keys.WORKLOAD_TYPE))
        setattr_(self, "exempt", labels.get(keys.EXEMPT) == "true")
        setattr_(self, "owner_key", owner_of(self.namespace, self.owner, labels))

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def metadata(self) -> dict[str, Any]:
        """The kept metadata, Pod-shaped (name, namespace, uid, labels, annotations, the
        controlling owner): `manifest()`'s, and by itself the `pod` of a decision input whose
        policy reads no spec or status (disruption: `{"metadata": pod.metadata()}`). Its labels
        and annotations are the pod's own dicts, not copies: to serialize, never to change."""
        metadata: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,
            "labels": self.labels,
            "annotations": self.annotations,
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
        return metadata

    def manifest(self) -> dict[str, Any]:
        """A Pod-shaped dict of the fields kept: the `pod` of an OPA decision input."""
        metadata = self.metadata()
        metadata["labels"] = dict(self.labels)
        metadata["annotations"] = dict(self.annotations)
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


def controller_owner(metadata: Any) -> OwnerRef | None:
    for ref in array_field(metadata, "ownerReferences", "metadata"):
        if ref.get("controller"):
            path = "metadata.ownerReferences[]"
            return OwnerRef(
                string_field(ref, "apiVersion", path),
                string_field(ref, "kind", path),
                string_field(ref, "name", path),
                string_field(ref, "uid", path),
            )
    return None


def _slim_container(container: Any) -> dict[str, Any]:
    slim: dict[str, Any] = {"name": string_field(container, "name", "spec.containers[]")}
    image = string_field(container, "image", "spec.containers[]")
    if image:
        slim["image"] = image
    resources = plain(object_field(container, "resources", "spec.containers[]"))
    if resources:
        slim["resources"] = resources
    return slim


def accelerator_pod_from_api(raw: Any) -> Pod | None:
    """The slim view of a pod that holds or requests accelerators; None (cheaply) for others.
    DecodeError (naming the pod and the field) when a field it reads has the wrong type."""

    def convert() -> Pod | None:
        spec = root_sections(raw)[1]
        demand = pod_demand(spec)
        # A pod with DRA claims is kept for the GPUs they hold (observe/dra_claims.py).
        return _pod(raw, demand) if demand or spec.get("resourceClaims") else None

    return decoding("pod", raw, convert)


def pod_from_api(raw: Any, demand: dict[str, int] | None = None) -> Pod:
    """The slim view of any pod; DecodeError when a field it reads has the wrong type."""
    return decoding("pod", raw, lambda: _pod(raw, demand))


def _pod(raw: Any, demand: dict[str, int] | None) -> Pod:
    # The hot loop of a pass (once per listed accelerator pod): each field is read once.
    metadata, spec, status = root_sections(raw)
    unschedulable_since = None
    scheduled_at = None
    created = string_field(metadata, "creationTimestamp", "metadata", None)
    for condition in object_list(status, "conditions", "status"):
        if condition.get("type") == "PodScheduled":
            state = condition.get("status")
            if state == "False" and condition.get("reason") == "Unschedulable":
                unschedulable_since = parse_time(condition.get("lastTransitionTime")) or parse_time(
                    created
                )
            elif state == "True":
                scheduled_at = parse_time(condition.get("lastTransitionTime"))
    phase = string_field(status, "phase", "status", None) or "Pending"
    finished = None
    if phase in ("Succeeded", "Failed"):
        ends = []
        for container in object_list(status, "containerStatuses", "status"):
            state = object_field(container, "state", "status.containerStatuses[]")
            terminated = object_field(state, "terminated", "status.containerStatuses[].state")
            ends.append(parse_time(terminated.get("finishedAt")))
        known = [e for e in ends if e is not None]
        finished = max(known) if known else None
    terms: Any = ()
    required_pod_affinity = False
    if spec.get("affinity"):
        affinity = object_field(spec, "affinity", "spec")
        required_pod_affinity = any(
            object_list(
                object_field(affinity, kind, "spec.affinity"),
                "requiredDuringSchedulingIgnoredDuringExecution",
                f"spec.affinity.{kind}",
            )
            for kind in ("podAffinity", "podAntiAffinity")
        )
        node_affinity = object_field(affinity, "nodeAffinity", "spec.affinity")
        required = object_field(
            node_affinity,
            "requiredDuringSchedulingIgnoredDuringExecution",
            "spec.affinity.nodeAffinity",
        )
        terms = object_list(required, "nodeSelectorTerms", "spec.affinity.nodeAffinity.required")
    node_name = string_field(spec, "nodeName", "spec", None)
    containers = object_list(spec, "containers", "spec")
    return Pod(
        namespace=string_field(metadata, "namespace", "metadata"),
        name=string_field(metadata, "name", "metadata"),
        uid=string_field(metadata, "uid", "metadata"),
        resource_version=string_field(metadata, "resourceVersion", "metadata"),
        labels=string_map_field(metadata, "labels", "metadata"),
        annotations=string_map_field(metadata, "annotations", "metadata"),
        owner=controller_owner(metadata) if "ownerReferences" in metadata else None,
        node_name=node_name or None,
        phase=phase,
        priority=integer_field(spec, "priority", "spec") or 0,
        priority_class=string_field(spec, "priorityClassName", "spec", None),
        demand=pod_demand(spec) if demand is None else demand,
        created=parse_time(created) or 0.0,
        started=parse_time(string_field(status, "startTime", "status", None)) or scheduled_at,
        finished=finished,
        deleting="deletionTimestamp" in metadata and bool(metadata.get("deletionTimestamp")),
        unschedulable_since=unschedulable_since if not node_name else None,
        node_selector=string_map_field(spec, "nodeSelector", "spec"),
        tolerations=tuple(plain(t) for t in object_list(spec, "tolerations", "spec")),
        required_affinity=tuple(plain(t) for t in terms),
        required_pod_affinity=required_pod_affinity,
        grace_seconds=integer_field(spec, "terminationGracePeriodSeconds", "spec"),
        containers=tuple(_slim_container(c) for c in containers),
        active_deadline_seconds=integer_field(spec, "activeDeadlineSeconds", "spec"),
    )


@view
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


def node_from_api(raw: Any) -> Node:
    """The slim view of a node; DecodeError when a field it reads has the wrong type."""

    def convert() -> Node:
        metadata, spec, status = root_sections(raw)
        allocatable = {
            r: _count(q)
            for r, q in object_field(status, "allocatable", "status").items()
            if is_accelerator(r)
        }
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in array_field(status, "conditions", "status")
        )
        return Node(
            name=string_field(metadata, "name", "metadata"),
            labels=string_map_field(metadata, "labels", "metadata"),
            allocatable=allocatable,
            taints=tuple(plain(t) for t in array_field(spec, "taints", "spec")),
            ready=ready,
            unschedulable=bool(spec.get("unschedulable")),
        )

    return decoding("node", raw, convert)


@dataclass(frozen=True, slots=True, kw_only=True)
class Namespace:
    name: str
    uid: str
    resource_version: str
    labels: dict[str, str]
    annotations: dict[str, str]


def namespace_from_api(raw: Any) -> Namespace:
    def convert() -> Namespace:
        metadata = root_sections(raw)[0]
        return Namespace(
            name=string_field(metadata, "name", "metadata"),
            uid=string_field(metadata, "uid", "metadata"),
            resource_version=string_field(metadata, "resourceVersion", "metadata"),
            labels=string_map_field(metadata, "labels", "metadata"),
            annotations=string_map_field(metadata, "annotations", "metadata"),
        )

    return decoding("namespace", raw, convert)


@dataclass(frozen=True, slots=True, kw_only=True)
class DisruptionBudget:
    namespace: str
    name: str
    selector: dict[str, Any]
    disruptions_allowed: int

    def selects(self, pod: Pod) -> bool:
        return pod.namespace == self.namespace and selector_matches(self.selector, pod.labels)


def pdb_from_api(raw: Any) -> DisruptionBudget:
    def convert() -> DisruptionBudget:
        metadata, spec, status = root_sections(raw)
        return DisruptionBudget(
            namespace=string_field(metadata, "namespace", "metadata"),
            name=string_field(metadata, "name", "metadata"),
            selector=plain(object_field(spec, "selector", "spec")),
            disruptions_allowed=integer_field(status, "disruptionsAllowed", "status") or 0,
        )

    return decoding("poddisruptionbudget", raw, convert)


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
