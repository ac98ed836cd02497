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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import simdjson

from controller.errors import PermanentError
from controller.views import view
from fleet import labels as keys

T = TypeVar("T")
ACCELERATOR_RESOURCES = frozenset(keys.ACCELERATOR_RESOURCES)


def is_accelerator(resource: str) -> bool:
    return resource in ACCELERATOR_RESOURCES or resource.startswith(keys.MIG_RESOURCE_PREFIX)


def family(resource: str) -> str:
    """The device family a resource counts against (MIG devices are GPUs)."""
    return keys.GPU_RESOURCE if resource.startswith(keys.MIG_RESOURCE_PREFIX) else resource


class DecodeError(PermanentError):
    """A listed object has a field of the wrong type (or is no object at all)."""


_OBJECTS = (dict, simdjson.Object)
_ARRAYS = (list, tuple, simdjson.Array)


def plain(value: Any) -> Any:
    """A decoded JSON value as plain Python: a lazy (simdjson) object or array is copied out,
    anything else is returned as it is."""
    if isinstance(value, simdjson.Object):
        return value.as_dict()
    if isinstance(value, simdjson.Array):
        return value.as_list()
    return value


def _kind(value: Any) -> str:
    if isinstance(value, _OBJECTS):
        return "object"
    if isinstance(value, _ARRAYS):
        return "array"
    return type(value).__name__


def _object(parent: Any, key: str, path: str) -> Any:
    """parent[key] when it is a JSON object; {} when missing or null; DecodeError otherwise.
    `path` (where parent is, a literal) only goes into the error."""
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, _OBJECTS):
        raise DecodeError(f"{path}.{key}: expected an object, got {_kind(value)}")
    return value


def _array(parent: Any, key: str, path: str) -> Any:
    """parent[key] when it is a JSON array of objects; () when missing or null."""
    value = parent.get(key)
    if value is None:
        return ()
    if not isinstance(value, _ARRAYS):
        raise DecodeError(f"{path}.{key}: expected an array, got {_kind(value)}")
    for index, element in enumerate(value):
        if not isinstance(element, _OBJECTS):
            raise DecodeError(f"{path}.{key}[{index}]: expected an object, got {_kind(element)}")
    return value


def _string(parent: Any, key: str, path: str, default: str | None = "") -> Any:
    value = parent.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise DecodeError(f"{path}.{key}: expected a string, got {_kind(value)}")
    return value


def _string_map(parent: Any, key: str, path: str) -> dict[str, str]:
    """parent[key] copied out as a dict of strings (labels, annotations, node selectors)."""
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, _OBJECTS):
        raise DecodeError(f"{path}.{key}: expected an object, got {_kind(value)}")
    copied = plain(value)
    if not all(type(v) is str for v in copied.values()):
        k, v = next((k, v) for k, v in copied.items() if type(v) is not str)
        raise DecodeError(f"{path}.{key}[{k!r}]: expected a string, got {_kind(v)}")
    return copied if isinstance(value, simdjson.Object) else dict(copied)


def _root(raw: Any) -> tuple[Any, Any, Any]:
    """metadata, spec and status of an object ({} for each one missing)."""
    if not isinstance(raw, _OBJECTS):
        raise DecodeError(f"expected an object, got {_kind(raw)}")
    return _object(raw, "metadata", ""), _object(raw, "spec", ""), _object(raw, "status", "")


def _identity(kind: str, raw: Any) -> str:
    """`pod ns/name` for an error message, as far as the object allows."""
    try:
        metadata = raw.get("metadata") or {}
        name, namespace = metadata.get("name"), metadata.get("namespace")
    except (AttributeError, TypeError, ValueError):
        return kind
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _decoding(kind: str, raw: Any, convert: Callable[[], T]) -> T:
    """Run a conversion; any malformed field becomes a DecodeError naming the object."""
    try:
        return convert()
    except DecodeError as error:
        raise DecodeError(f"{_identity(kind, raw)}: {error}") from None
    except (AttributeError, TypeError, ValueError, KeyError) as error:
        raise DecodeError(f"{_identity(kind, raw)}: malformed: {error}") from None


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


def pod_demand(spec: Any) -> dict[str, int]:
    """Accelerators a pod holds, per resource, with Kubernetes semantics: the larger of the app
    containers plus sidecar init containers, and the peak of any one regular init container
    (plus the sidecars started before it). Counted by limit (extended resources are allocated by
    limit; a request may only repeat it)."""

    def of(container: Any) -> dict[str, int]:
        resources = _object(container, "resources", "spec.containers[]")
        found: dict[str, int] = {}
        if not resources:
            return found
        for key in ("limits", "requests"):
            source = resources.get(key)
            if not source:
                continue
            if not isinstance(source, _OBJECTS):
                raise DecodeError(
                    f"spec.containers[].resources.{key}: expected an object, got {_kind(source)}"
                )
            for resource in source:
                if resource not in found and (
                    resource in ACCELERATOR_RESOURCES
                    or resource.startswith(keys.MIG_RESOURCE_PREFIX)
                ):
                    found[resource] = _count(source[resource])
        return found

    return effective_demand(
        [of(c) for c in _array(spec, "containers", "spec")],
        [
            (of(c), c.get("restartPolicy") == "Always")
            for c in _array(spec, "initContainers", "spec")
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
    active_deadline_seconds: int | None = None

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


def _controller_owner(metadata: Any) -> OwnerRef | None:
    for ref in _array(metadata, "ownerReferences", "metadata"):
        if ref.get("controller"):
            path = "metadata.ownerReferences[]"
            return OwnerRef(
                _string(ref, "apiVersion", path),
                _string(ref, "kind", path),
                _string(ref, "name", path),
                _string(ref, "uid", path),
            )
    return None


def _slim_container(container: Any) -> dict[str, Any]:
    slim: dict[str, Any] = {"name": _string(container, "name", "spec.containers[]")}
    image = _string(container, "image", "spec.containers[]")
    if image:
        slim["image"] = image
    resources = plain(_object(container, "resources", "spec.containers[]"))
    if resources:
        slim["resources"] = resources
    return slim


def accelerator_pod_from_api(raw: Any) -> Pod | None:
    """The slim view of a pod that holds or requests accelerators; None (cheaply) for others.
    DecodeError (naming the pod and the field) when a field it reads has the wrong type."""

    def convert() -> Pod | None:
        spec = _root(raw)[1]
        demand = pod_demand(spec)
        return _pod(raw, demand) if demand else None

    return _decoding("pod", raw, convert)


def pod_from_api(raw: Any, demand: dict[str, int] | None = None) -> Pod:
    """The slim view of any pod; DecodeError when a field it reads has the wrong type."""
    return _decoding("pod", raw, lambda: _pod(raw, demand))


def _integer(parent: Any, key: str, path: str) -> int | None:
    value = parent.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise DecodeError(f"{path}.{key}: expected an integer, got {_kind(value)}")
    return value


def _objects(parent: Any, key: str, path: str) -> list[Any]:
    """parent[key] as a list of JSON objects ([] when missing or null), checked in one pass."""
    value = parent.get(key)
    if value is None:
        return []
    if not isinstance(value, _ARRAYS):
        raise DecodeError(f"{path}.{key}: expected an array, got {_kind(value)}")
    elements = list(value)
    for index, element in enumerate(elements):
        if not isinstance(element, _OBJECTS):
            raise DecodeError(f"{path}.{key}[{index}]: expected an object, got {_kind(element)}")
    return elements


def _pod(raw: Any, demand: dict[str, int] | None) -> Pod:
    # The hot loop of a pass (once per listed accelerator pod): each field is read once.
    metadata, spec, status = _root(raw)
    unschedulable_since = None
    scheduled_at = None
    created = _string(metadata, "creationTimestamp", "metadata", None)
    for condition in _objects(status, "conditions", "status"):
        if condition.get("type") == "PodScheduled":
            state = condition.get("status")
            if state == "False" and condition.get("reason") == "Unschedulable":
                unschedulable_since = parse_time(condition.get("lastTransitionTime")) or parse_time(
                    created
                )
            elif state == "True":
                scheduled_at = parse_time(condition.get("lastTransitionTime"))
    phase = _string(status, "phase", "status", None) or "Pending"
    finished = None
    if phase in ("Succeeded", "Failed"):
        ends = []
        for container in _objects(status, "containerStatuses", "status"):
            state = _object(container, "state", "status.containerStatuses[]")
            terminated = _object(state, "terminated", "status.containerStatuses[].state")
            ends.append(parse_time(terminated.get("finishedAt")))
        known = [e for e in ends if e is not None]
        finished = max(known) if known else None
    terms: Any = ()
    if spec.get("affinity"):
        node_affinity = _object(_object(spec, "affinity", "spec"), "nodeAffinity", "spec.affinity")
        required = _object(
            node_affinity,
            "requiredDuringSchedulingIgnoredDuringExecution",
            "spec.affinity.nodeAffinity",
        )
        terms = _objects(required, "nodeSelectorTerms", "spec.affinity.nodeAffinity.required")
    node_name = _string(spec, "nodeName", "spec", None)
    containers = _objects(spec, "containers", "spec")
    return Pod(
        namespace=_string(metadata, "namespace", "metadata"),
        name=_string(metadata, "name", "metadata"),
        uid=_string(metadata, "uid", "metadata"),
        resource_version=_string(metadata, "resourceVersion", "metadata"),
        labels=_string_map(metadata, "labels", "metadata"),
        annotations=_string_map(metadata, "annotations", "metadata"),
        owner=_controller_owner(metadata) if "ownerReferences" in metadata else None,
        node_name=node_name or None,
        phase=phase,
        priority=_integer(spec, "priority", "spec") or 0,
        priority_class=_string(spec, "priorityClassName", "spec", None),
        demand=pod_demand(spec) if demand is None else demand,
        created=parse_time(created) or 0.0,
        started=parse_time(_string(status, "startTime", "status", None)) or scheduled_at,
        finished=finished,
        deleting="deletionTimestamp" in metadata and bool(metadata.get("deletionTimestamp")),
        unschedulable_since=unschedulable_since if not node_name else None,
        node_selector=_string_map(spec, "nodeSelector", "spec"),
        tolerations=tuple(plain(t) for t in _objects(spec, "tolerations", "spec")),
        required_affinity=tuple(plain(t) for t in terms),
        grace_seconds=_integer(spec, "terminationGracePeriodSeconds", "spec"),
        containers=tuple(_slim_container(c) for c in containers),
        active_deadline_seconds=_integer(spec, "activeDeadlineSeconds", "spec"),
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
        metadata, spec, status = _root(raw)
        allocatable = {
            r: _count(q)
            for r, q in _object(status, "allocatable", "status").items()
            if is_accelerator(r)
        }
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in _array(status, "conditions", "status")
        )
        return Node(
            name=_string(metadata, "name", "metadata"),
            labels=_string_map(metadata, "labels", "metadata"),
            allocatable=allocatable,
            taints=tuple(plain(t) for t in _array(spec, "taints", "spec")),
            ready=ready,
            unschedulable=bool(spec.get("unschedulable")),
        )

    return _decoding("node", raw, convert)


@dataclass(frozen=True, slots=True, kw_only=True)
class Namespace:
    name: str
    uid: str
    resource_version: str
    labels: dict[str, str]
    annotations: dict[str, str]


def namespace_from_api(raw: Any) -> Namespace:
    def convert() -> Namespace:
        metadata = _root(raw)[0]
        return Namespace(
            name=_string(metadata, "name", "metadata"),
            uid=_string(metadata, "uid", "metadata"),
            resource_version=_string(metadata, "resourceVersion", "metadata"),
            labels=_string_map(metadata, "labels", "metadata"),
            annotations=_string_map(metadata, "annotations", "metadata"),
        )

    return _decoding("namespace", raw, convert)


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
        metadata, spec, status = _root(raw)
        return DisruptionBudget(
            namespace=_string(metadata, "namespace", "metadata"),
            name=_string(metadata, "name", "metadata"),
            selector=plain(_object(spec, "selector", "spec")),
            disruptions_allowed=_integer(status, "disruptionsAllowed", "status") or 0,
        )

    return _decoding("poddisruptionbudget", raw, convert)


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
