"""The `observe.model` views of pods and nodes, built from Kubernetes protobuf messages.

`KubeClient.list_protobuf` lists pods and nodes as protobuf (`k8s_pb`, generated from
k8s.io/api's .proto files): the API server encodes it about three times cheaper than JSON and the
messages parse in C (upb), so only the fields the views read become Python objects. The views
are the same, field for field (dataclass `==`), as `model.pod_from_api` / `node_from_api` build
from the same object's JSON; tests/controller/test_observe_proto.py checks both against the real
kube-apiserver.

What differs between the encodings, and how it is bridged:
- Times (`metav1.Time`) are seconds, not RFC 3339; the API server writes a zero time as an
  empty message (JSON: null), so 0 seconds reads as no time. Where a view keeps a time inside a
  dict (a taint's `timeAdded`) it is formatted as the JSON has it.
- Quantities are messages; `Quantity.string` is the canonical string the JSON has.
- The API server writes every non-pointer field of a Go struct into the protobuf, set or empty,
  while its JSON leaves out empty `omitempty` fields. Dicts copied out of messages (tolerations,
  taints, node-affinity terms, container resources) therefore leave out empty fields, except
  those the JSON always writes (`_JSON_ALWAYS`, from the Go struct tags).
- Nothing can have the wrong type; what can still be malformed (a quantity that is not a whole
  number counts 0 devices, as in the JSON path; a time out of range) raises `DecodeError` naming
  the object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from controller.observe.k8s_pb import core_v1_pb2
from controller.observe.model import (
    ACCELERATOR_RESOURCES,
    DecodeError,
    Node,
    OwnerRef,
    Pod,
    effective_demand,
    format_time,
    is_accelerator,
)
from fleet import labels as keys

T = TypeVar("T")
PodList: Any = core_v1_pb2.PodList
NodeList: Any = core_v1_pb2.NodeList

_MIG = keys.MIG_RESOURCE_PREFIX
_CORE = "k8s.io.api.core.v1."
_TIME = "k8s.io.apimachinery.pkg.apis.meta.v1.Time"
_QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"

# Fields the JSON writes even when empty or zero: non-`omitempty` strings, and pointers (set
# means present, 0 included). Only for the messages copied out as dicts.
_JSON_ALWAYS: dict[str, frozenset[str]] = {
    f"{_CORE}NodeSelectorRequirement": frozenset({"key", "operator"}),
    f"{_CORE}Taint": frozenset({"key", "effect"}),
    f"{_CORE}Toleration": frozenset({"tolerationSeconds"}),
    f"{_CORE}ResourceClaim": frozenset({"name"}),
}


def _seconds(time: Any) -> float | None:
    """A metav1.Time as epoch seconds (what `parse_time` gives for its JSON); None when unset or
    zero."""
    seconds = time.seconds
    return float(seconds) if seconds else None


def _dict(entries: Any) -> dict[str, Any]:
    """A protobuf map as a dict. `dict(entries)` goes through the Python code of the Mapping ABC
    (keys(), a KeysView); this uses the map's own iteration and lookup, and skips empty maps
    (most annotations and node selectors): about 1 us less per map, three maps per pod."""
    return {key: entries[key] for key in entries} if entries else {}


def _count(quantity: Any) -> int:
    """As `model._count`: whole devices, anything else 0."""
    try:
        return int(quantity.string)
    except ValueError:
        return 0


_SCALAR, _KEPT_SCALAR, _REPEATED, _MESSAGE, _MESSAGES, _MAP, _QUANTITIES, _MESSAGE_MAP = range(8)
# Per field descriptor: its JSON name and how to copy it (as_json runs for every toleration and
# container of every pod, so the descriptor is looked at once per field, not per message).
_PLANS: dict[Any, tuple[str, int]] = {}


def _plan(field: Any) -> tuple[str, int]:
    message = field.message_type
    repeated = field.is_repeated
    if message is not None and message.GetOptions().map_entry:
        value = message.fields_by_name["value"].message_type
        if value is None:
            kind = _MAP
        else:
            kind = _QUANTITIES if value.full_name == _QUANTITY else _MESSAGE_MAP
    elif message is not None:
        kind = _MESSAGES if repeated else _MESSAGE
    elif repeated:
        kind = _REPEATED
    else:
        always = _JSON_ALWAYS.get(field.containing_type.full_name, ())
        kind = _KEPT_SCALAR if field.name in always else _SCALAR
    plan = _PLANS[field] = (field.name, kind)
    return plan


def _value(message: Any) -> Any:
    name = message.DESCRIPTOR.full_name
    if name == _QUANTITY:
        return message.string
    if name == _TIME:
        seconds = message.seconds
        return format_time(seconds) if seconds else None
    if name == _INT_OR_STRING:
        return message.intVal if message.type == 0 else message.strVal
    return as_json(message)


def as_json(message: Any) -> dict[str, Any]:
    """A message as the dict its JSON decodes to (field names are the JSON names in k8s.io's
    .proto files); see the module doc for what is left out."""
    found: dict[str, Any] = {}
    plans = _PLANS
    for field, value in message.ListFields():
        name, kind = plans.get(field) or _plan(field)
        if kind == _SCALAR:
            if value:
                found[name] = value
        elif kind == _KEPT_SCALAR:
            found[name] = value
        elif kind == _QUANTITIES:
            found[name] = {k: value[k].string for k in value}
        elif kind == _REPEATED:
            found[name] = list(value)
        elif kind == _MESSAGE:
            found[name] = _value(value)
        elif kind == _MESSAGES:
            found[name] = [_value(v) for v in value]
        elif kind == _MAP:
            found[name] = _dict(value)
        else:
            found[name] = {k: _value(value[k]) for k in value}
    return found


def _decoding(kind: str, message: Any, convert: Callable[[], T]) -> T:
    try:
        return convert()
    except (AttributeError, TypeError, ValueError, KeyError, OverflowError) as error:
        metadata = message.metadata
        name = f"{metadata.namespace}/{metadata.name}" if metadata.namespace else metadata.name
        raise DecodeError(f"{kind} {name}: malformed: {error}") from None


_SAME_MAX = 10_000
"""Distinct containers (tolerations, resources) remembered: a fleet's pods repeat few of them."""
_CONTAINERS: dict[tuple[str, str, bytes], dict[str, Any]] = {}
_TOLERATIONS: dict[bytes, dict[str, Any]] = {}
_DEMANDS: dict[bytes, dict[str, int]] = {}


def _remember(cache: dict[Any, T], key: Any, value: T) -> T:
    """`value`, kept in `cache` under `key` while the cache holds fewer than `_SAME_MAX`: the
    bound of the three shared-dict caches above, in one place. Asked only on a miss, so the
    hit stays one dict lookup in the hot loop."""
    if len(cache) < _SAME_MAX:
        cache[key] = value
    return value


def pod_demand(spec: Any) -> dict[str, int]:
    """`model.pod_demand` on a PodSpec message: the same Kubernetes semantics (app containers
    plus sidecar init containers, or the peak of one regular init container), counted by limit,
    then by request."""
    containers = spec.containers
    if len(containers) == 1 and not spec.initContainers:
        # Most pods: one container, whose counts are the demand (`effective_demand`'s first
        # case). Its resources repeat across the fleet's pods: each is counted once and the
        # same read-only dict shared, as `_slim_container` shares its dicts.
        resources = containers[0].resources
        key = resources.SerializeToString()
        found = _DEMANDS.get(key)
        if found is None:
            found = _remember(
                _DEMANDS, key, {r: n for r, n in _resources_demand(resources).items() if n > 0}
            )
        return found
    return effective_demand(
        [_resources_demand(c.resources) for c in containers],
        [
            (_resources_demand(c.resources), c.restartPolicy == "Always")
            for c in spec.initContainers
        ],
    )


def _resources_demand(resources: Any) -> dict[str, int]:
    found: dict[str, int] = {}
    for source in (resources.limits, resources.requests):
        for resource in source:
            if resource not in found and (
                resource in ACCELERATOR_RESOURCES or resource.startswith(_MIG)
            ):
                found[resource] = _count(source[resource])
    return found


def accelerator_pod_from_proto(pod: Any) -> Pod | None:
    """`model.accelerator_pod_from_api` for a Pod message: the view of a pod that holds or
    requests accelerators; None (cheaply) for others."""

    def convert() -> Pod | None:
        demand = pod_demand(pod.spec)
        # A pod with DRA claims is kept for the GPUs they hold (observe/dra_claims.py).
        return _pod(pod, demand) if demand or len(pod.spec.resourceClaims) else None

    return _decoding("pod", pod, convert)


def pod_from_proto(pod: Any, demand: dict[str, int] | None = None) -> Pod:
    """`model.pod_from_api` for a Pod message."""
    return _decoding("pod", pod, lambda: _pod(pod, demand))


def _slim_container(container: Any) -> dict[str, Any]:
    """A container's name, image and resources, as the JSON has them. The pods of a fleet share
    few of these, so each is copied out once and the same read-only dict shared by the pods
    that have it (views are read-only, controller/views.py): its key, the resources' protobuf
    encoding (made in C), is a third of copying them out of the message in Python."""
    name, image = container.name, container.image
    resources = container.resources
    key = (name, image, resources.SerializeToString())
    slim = _CONTAINERS.get(key)
    if slim is None:
        slim = {"name": name}
        if image:
            slim["image"] = image
        copied = as_json(resources)
        if copied:
            slim["resources"] = copied
        _remember(_CONTAINERS, key, slim)
    return slim


def _toleration(toleration: Any) -> dict[str, Any]:
    """`as_json` of a toleration, shared as `_slim_container`'s dicts are (most pods carry the
    same few: the API server's not-ready and unreachable ones, the accelerator taints')."""
    key = toleration.SerializeToString()
    found = _TOLERATIONS.get(key)
    if found is None:
        found = _remember(_TOLERATIONS, key, as_json(toleration))
    return found


def _pod(pod: Any, demand: dict[str, int] | None) -> Pod:
    # The hot loop of a pass, as model._pod: each field read once.
    metadata, spec, status = pod.metadata, pod.spec, pod.status
    created = _seconds(metadata.creationTimestamp)
    node_name = spec.nodeName or None
    started = _seconds(status.startTime)
    unschedulable_since = None
    scheduled_at = None
    # The PodScheduled condition matters only to a pod without a node (since when it is
    # unschedulable) or without a start time (when it was scheduled stands in): a running pod
    # skips its conditions, a sixth of its view's cost.
    if node_name is None or started is None:
        for condition in status.conditions:
            if condition.type == "PodScheduled":
                state = condition.status
                if state == "False" and condition.reason == "Unschedulable":
                    unschedulable_since = _seconds(condition.lastTransitionTime) or created
                elif state == "True":
                    scheduled_at = _seconds(condition.lastTransitionTime)
    phase = status.phase or "Pending"
    finished = None
    if phase in ("Succeeded", "Failed"):
        known = [
            end
            for container in status.containerStatuses
            if container.state.HasField("terminated")
            and (end := _seconds(container.state.terminated.finishedAt)) is not None
        ]
        finished = max(known) if known else None
    terms: Any = ()
    required_pod_affinity = False
    if spec.HasField("affinity"):
        required_pod_affinity = bool(
            spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution
            or spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution
        )
        node_affinity = spec.affinity.nodeAffinity
        if node_affinity.HasField("requiredDuringSchedulingIgnoredDuringExecution"):
            terms = node_affinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms
    owner = None
    for ref in metadata.ownerReferences:
        if ref.controller:
            owner = OwnerRef(ref.apiVersion, ref.kind, ref.name, ref.uid)
            break
    return Pod(
        namespace=metadata.namespace,
        name=metadata.name,
        uid=metadata.uid,
        resource_version=metadata.resourceVersion,
        labels=_dict(metadata.labels),
        annotations=_dict(metadata.annotations),
        owner=owner,
        node_name=node_name,
        phase=phase,
        priority=spec.priority,
        priority_class=spec.priorityClassName or None,
        demand=pod_demand(spec) if demand is None else demand,
        created=created or 0.0,
        started=started or scheduled_at,
        finished=finished,
        deleting=bool(metadata.deletionTimestamp.seconds),
        unschedulable_since=unschedulable_since if not node_name else None,
        node_selector=_dict(spec.nodeSelector),
        tolerations=tuple(_toleration(t) for t in spec.tolerations),
        required_affinity=tuple(as_json(t) for t in terms),
        required_pod_affinity=required_pod_affinity,
        grace_seconds=(
            spec.terminationGracePeriodSeconds
            if spec.HasField("terminationGracePeriodSeconds")
            else None
        ),
        containers=tuple(_slim_container(c) for c in spec.containers),
        active_deadline_seconds=(
            spec.activeDeadlineSeconds if spec.HasField("activeDeadlineSeconds") else None
        ),
    )


def node_from_proto(node: Any) -> Node:
    """`model.node_from_api` for a Node message."""

    def convert() -> Node:
        metadata, spec, status = node.metadata, node.spec, node.status
        return Node(
            name=metadata.name,
            labels=_dict(metadata.labels),
            allocatable={
                r: _count(status.allocatable[r]) for r in status.allocatable if is_accelerator(r)
            },
            taints=tuple(as_json(t) for t in spec.taints),
            ready=any(c.type == "Ready" and c.status == "True" for c in status.conditions),
            unschedulable=bool(spec.unschedulable),
        )

    return _decoding("node", node, convert)
