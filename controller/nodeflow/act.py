"""The side effects every node workflow shares, each idempotent: cordon and uncordon, a taint,
the validator pod created or deleted (`perform` carries out the common steps), an eviction of
exactly the pod judged, and a state written with the resourceVersion last seen and read back.

Errors are raised to the mode's step (`Runtime.guarded` logs and counts them); an eviction's
expected refusals are outcomes, not errors.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any, Final

from controller.act.events import ObjectRef
from controller.act.runtime import Runtime
from controller.act.writes import patch_fresh
from controller.errors import ConflictError, NotFoundError, TemporaryError, TooManyRequestsError
from controller.log import Log
from controller.nodeflow.pods import PodView
from controller.nodeflow.steps import (
    Cordon,
    CreateValidator,
    DeleteValidator,
    Taint,
    Uncordon,
    Untaint,
)
from controller.observe.kube import KubeClient, object_path, pod_path


class NodeRef(ObjectRef):
    """A Node as an Event's involved object: cluster-scoped, so the Event lives in `default`
    and names no namespace (what `kubectl describe node` looks for)."""

    def involved(self) -> dict[str, Any]:
        ref = ObjectRef.involved(self)
        ref.pop("namespace", None)
        return ref


def node_ref(name: str) -> NodeRef:
    return NodeRef(api_version="v1", kind="Node", namespace="default", name=name)


def pod_ref(pod: PodView) -> ObjectRef:
    return ObjectRef(
        api_version="v1", kind="Pod", namespace=pod.namespace, name=pod.name, uid=pod.uid
    )


def node_path(name: str) -> str:
    return object_path("v1", "nodes", None, name)


def ask(
    rt: Runtime,
    concern: str,
    decision: str,
    node: str,
    facts: dict[str, Any],
    *,
    action: str,
    what: str,
) -> str | None:
    """Ask OPA's `decision` about a step (`facts` is its input). None when it allows; else its
    reasons, logged, counted under `action` and, under --dry-run, shown (`what` the step would
    have done: "starting gpu-1")."""
    answer = rt.opa.decide(decision, facts)
    if answer.allow:
        return None
    rt.log.info(f"{concern}.denied", node=node, action=action, reasons=list(answer.reasons))
    rt.summary.action(concern, action, "denied")
    if rt.dry_run:
        rt.out.write(f"DRY-RUN {concern}: OPA denies {what}: {answer.because()}\n")
    return answer.because()


def show(
    rt: Runtime,
    concern: str,
    node: str,
    actions: tuple[Any, ...],
    *,
    transition: str | None,
    record: str | None = None,
) -> None:
    """Under --dry-run: what a step would do (its actions, then its move `transition`, or only
    a `record` of its detail)."""
    for action in actions:
        rt.would(concern, action.name, node, action.describe(node))
    if transition is not None:
        rt.would(concern, "set-state", node, transition)
    elif record is not None:
        rt.would(concern, "record", node, record)


def set_unschedulable(
    kube: KubeClient, name: str, unschedulable: bool, *, annotations: dict[str, str | None] | None
) -> str:
    """Cordon or uncordon the node, with `annotations` in the same patch (a mode's mark that it
    cordoned the node). Returns the node's new resourceVersion."""
    patch: dict[str, Any] = {"spec": {"unschedulable": unschedulable}}
    if annotations is not None:
        patch["metadata"] = {"annotations": annotations}
    updated = kube.merge_patch(node_path(name), patch)
    return str(updated["metadata"]["resourceVersion"])


def retaint(kube: KubeClient, name: str, key: str, value: str | None) -> dict[str, Any] | None:
    """Add (`value` set) or remove the NoSchedule taint `key`. A node's taints have no strategic
    merge key, so the whole list is written, computed from the node as read and guarded by its
    resourceVersion (a conflict re-reads it and computes again)."""

    def build(current: dict[str, Any] | None) -> dict[str, Any] | None:
        source = current if current is not None else kube.get(node_path(name))
        taints = [t for t in (source.get("spec") or {}).get("taints") or () if t.get("key") != key]
        if value is not None:
            taints.append({"key": key, "value": value, "effect": "NoSchedule"})
        return {
            "spec": {"taints": taints},
            "metadata": {"resourceVersion": (source.get("metadata") or {}).get("resourceVersion")},
        }

    return patch_fresh(kube, node_path(name), None, build)


def delete_exactly(kube: KubeClient, pod: PodView) -> None:
    """Delete this pod and no other: a replacement with the same name has another uid."""
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": pod.uid}}
    # Not found, or a precondition miss (replaced): either way the pod meant is gone.
    with contextlib.suppress(NotFoundError, ConflictError):
        kube.delete(pod_path(pod.namespace, pod.name), body)


def create_validator(kube: KubeClient, manifest: dict[str, Any]) -> None:
    # A conflict means an earlier, interrupted pass created it already.
    with contextlib.suppress(ConflictError):
        kube.create(pod_path(manifest["metadata"]["namespace"]), manifest)


CommonStep = Cordon | Uncordon | Taint | Untaint | CreateValidator | DeleteValidator
COMMON_STEPS = (Cordon, Uncordon, Taint, Untaint, CreateValidator, DeleteValidator)
"""For `isinstance`: the steps `perform` carries out."""


def perform(
    rt: Runtime,
    concern: str,
    action: CommonStep,
    node: str,
    reason: str,
    *,
    cordon_mark: str | None = None,
) -> str | None:
    """Carry out one common step and record it. A mode that marks its own cordon names the
    annotation (`cordon_mark`): written with the cordon, removed with the uncordon. Returns the
    node's resourceVersion when the step patched the node, else None."""
    if isinstance(action, Cordon | Uncordon):
        cordon = isinstance(action, Cordon)
        marks = None if cordon_mark is None else {cordon_mark: "true" if cordon else None}
        version = set_unschedulable(rt.kube, node, cordon, annotations=marks)
        rt.done(concern, action.name, node, reason)
        return version
    if isinstance(action, Taint | Untaint):
        value = action.value if isinstance(action, Taint) else None
        updated = retaint(rt.kube, node, action.key, value)
        rt.done(concern, action.name, node, reason)
        return None if updated is None else str(updated["metadata"]["resourceVersion"])
    if isinstance(action, CreateValidator):
        create_validator(rt.kube, action.manifest)
        rt.done(concern, "create-validator", action.key, reason, node=node)
        return None
    delete_exactly(rt.kube, action.pod)
    rt.done(concern, "delete-validator", action.pod.key, reason, node=node)
    return None


class Eviction(StrEnum):
    EVICTED = "evicted"
    GONE = "gone"
    """Already gone: nothing to do."""
    REPLACED = "replaced"
    """The uid precondition missed: another pod took the name; it was not judged."""
    REFUSED = "refused"
    """A PodDisruptionBudget refused it (HTTP 429): the next pass tries again."""


def evict(
    rt: Runtime,
    concern: str,
    pod: PodView,
    node: str,
    *,
    grace_seconds: int | None,
    why: str,
    event: tuple[str, str],
    **recorded: Any,
) -> tuple[Eviction, str]:
    """Evict exactly the pod judged. An eviction done is recorded (`why`, and `recorded` with
    it) and told to the pod's owner by a warning Event (`event`: reason, message); one that did
    not happen is logged and counted. Returns the outcome and the server's message for a
    refusal."""
    try:
        rt.kube.evict(pod.namespace, pod.name, uid=pod.uid, grace_seconds=grace_seconds)
    except ConflictError as error:
        # The pod judged is gone and another took its name. That one was not judged: the step
        # stays incomplete and the next pass plans with it.
        rt.log.info(
            f"{concern}.evict.replaced",
            pod=pod.key,
            node=node,
            reason=f"not the pod planned for eviction (uid {pod.uid}); not evicted: {error}",
        )
        rt.summary.action(concern, "evict", "replaced")
        return Eviction.REPLACED, str(error)
    except TooManyRequestsError as error:
        rt.log.info(f"{concern}.evict.refused", pod=pod.key, node=node, error=str(error))
        rt.summary.action(concern, "evict", "blocked")
        return Eviction.REFUSED, str(error)
    except NotFoundError:
        return Eviction.GONE, ""
    rt.done(concern, "evict", pod.key, why, node=node, **recorded)
    reason, message = event
    rt.events.emit(pod_ref(pod), reason, message, warning=True)
    return Eviction.EVICTED, ""


class Keep(Enum):
    """`write_node_state(wanted=KEEP)`: the patch leaves the state label as it is."""

    STATE = "keep"


KEEP: Final = Keep.STATE


@dataclass(frozen=True)
class Written:
    state: str | None
    """The state label as the server's answer has it (None: no label)."""


def write_node_state(
    kube: KubeClient,
    name: str,
    *,
    label: str,
    expected: str | None,
    metadata: dict[str, Any],
    resource_version: str | None,
    wanted: str | Keep | None,
    log: Log,
    concern: str,
    shown: str,
) -> Written | None:
    """Patch the node's `metadata` (its state label, timer and detail) only while the node is
    still in state `expected` (a conflict re-reads the node and checks again), and read the
    state back from the server's answer: when the patch sets a state (`wanted`; None removes
    the label), anything else found is a temporary error (the next pass reads the node again).

    Returns the state label found afterwards; None when the node left `expected`
    meanwhile (`shown` names it in the log) and nothing was written."""

    def build(current: dict[str, Any] | None) -> dict[str, Any] | None:
        if current is not None:
            labels = (current.get("metadata") or {}).get("labels") or {}
            if labels.get(label) != expected:
                return None
        return {"metadata": metadata}

    updated = patch_fresh(kube, node_path(name), resource_version, build)
    if updated is None:
        log.warning(
            f"{concern}.state.skipped",
            node=name,
            reason=f"the node left state {shown} meanwhile; not written",
        )
        return None
    found = ((updated.get("metadata") or {}).get("labels") or {}).get(label)
    if wanted is not KEEP and found != wanted:
        raise TemporaryError(f"node {name}: state label reads {found!r} after writing {wanted!r}")
    return Written(state=found if isinstance(found, str) else None)
