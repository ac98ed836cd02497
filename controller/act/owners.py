"""Stop an operator's workload through its own API: suspend a TrainJob, JobSet, RayJob or
RayCluster, scale a LeaderWorkerSet to zero (decide.operator_kinds says why each that way).

The target a pod named (`decide.workloads.operator_target`: a JobSet, a LeaderWorkerSet, a
RayCluster) is where the climb starts, not necessarily what is stopped: from the owner of every
pod judged, the controlling owner references are followed through the API (a GET each, its uid
confirmed against the reference that named it) to the top, and the top is stopped:

    Pod -> Job -> JobSet [-> TrainJob]
    Pod -> RayCluster [-> RayJob]
    Pod -> StatefulSet -> LeaderWorkerSet            (the leaders)
    Pod -> StatefulSet -> Pod -> StatefulSet -> LWS  (a group's workers: their leader owns them)

Nothing is written when a link is gone (the workload ended), when an object is not the one
its child names (created again under the same name), when the climb does not pass through the
target the pods were grouped under (an operator's label on a pod its operator did not make),
when the pods judged lead to different tops, or when the top has a controlling owner the
controller cannot climb (that owner would undo the stop). A reason is returned for all but the
first, and the caller logs it as a change since the snapshot.

Every write is one merge patch of the top with the resourceVersion read (`act.writes`): the
stop (`spec.suspend: true`, or `spec.replicas: 0` with the replicas it had) together with the
record of why (`fleetplane.dev/reclaimed-at`, `reclaim-reason`), on the object the user wrote.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from controller import annotations as own
from controller.act.events import ObjectRef
from controller.act.runtime import Runtime
from controller.act.writes import patch_fresh
from controller.decide.operator_kinds import (
    LEADERWORKERSET,
    LWS_GROUP_LABEL,
    RAYJOB,
    OperatorKind,
    operator_kind,
)
from controller.decide.workloads import StopItem, Target
from controller.errors import NotFoundError
from controller.observe.kube import object_path

MAX_DEPTH = 8
"""The longest chain is an LWS worker's (four links); this bounds a malformed cycle."""

LINKS: dict[tuple[str, str], tuple[str, str]] = {
    ("", "Pod"): ("v1", "pods"),
    ("batch", "Job"): ("batch/v1", "jobs"),
    ("apps", "StatefulSet"): ("apps/v1", "statefulsets"),
}
"""(API group, kind) -> (apiVersion, plural) of the objects between a pod and an operator's
object, climbed through (they are not stopped)."""


def _group(api_version: str) -> str:
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def _path(api_version: str, kind: str, namespace: str, name: str) -> str | None:
    operator = operator_kind(api_version, kind)
    if operator is not None:
        return object_path(operator.api_version, operator.plural, namespace, name)
    link = LINKS.get((_group(api_version), kind))
    return None if link is None else object_path(link[0], link[1], namespace, name)


def _controller(obj: dict[str, Any]) -> dict[str, Any] | None:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return next((r for r in refs if isinstance(r, dict) and r.get("controller")), None)


def _uid(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


@dataclass
class Top:
    """The object at the top of the chain and what the climb passed through (kind/name)."""

    kind: OperatorKind
    path: str
    obj: dict[str, Any]
    passed: set[tuple[str, str]] = field(default_factory=set)

    @property
    def uid(self) -> str:
        return _uid(self.obj)

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])


class _Climb:
    """The climbs of one stop, sharing their reads (a JobSet's Jobs meet at the JobSet)."""

    def __init__(self, rt: Runtime, namespace: str) -> None:
        self.rt = rt
        self.namespace = namespace
        self.read: dict[str, dict[str, Any]] = {}

    def get(self, path: str) -> dict[str, Any]:
        if path not in self.read:
            self.read[path] = self.rt.kube.get(path)
        return self.read[path]

    def top(self, api_version: str, kind: str, name: str, uid: str) -> Top | str | None:
        """The top above the object a pod names as owner; None when a link is gone."""
        passed: set[tuple[str, str]] = set()
        top: Top | None = None
        for _ in range(MAX_DEPTH):
            path = _path(api_version, kind, self.namespace, name)
            if path is None:
                if top is None:
                    return f"{kind} {name} is no operator's object"
                return (
                    f"{top.kind.kind} {top.name} is controlled by {kind} {name}, which would "
                    "undo a stop of it"
                )
            try:
                obj = self.get(path)
            except NotFoundError:
                return None
            if uid and _uid(obj) != uid:
                return f"{kind} {name} has uid {_uid(obj)}, its child names {uid}: created again"
            passed.add((kind, name))
            operator = operator_kind(api_version, kind)
            if operator is not None:
                top = Top(operator, path, obj)
            owner = _controller(obj)
            if owner is None:
                break
            api_version, kind = str(owner.get("apiVersion", "")), str(owner.get("kind", ""))
            name, uid = str(owner.get("name", "")), str(owner.get("uid", ""))
        if top is None:
            return f"no operator's object above {kind} {name}"
        top.passed = passed
        return top


def resolve(rt: Runtime, target: Target, item: StopItem) -> Top | str | None:
    """The one top every judged pod's owners lead to, through `target`; None when gone; why
    not, as a sentence."""
    climb = _Climb(rt, target.namespace)
    tops: dict[str, Top] = {}
    owners = {
        (j.pod.owner.api_version, j.pod.owner.kind, j.pod.owner.name, j.pod.owner.uid)
        for j in item.pods
        if j.pod.owner is not None
    }
    if len(owners) < 1:
        return f"{target.key}: the pods judged name no owner"
    for api_version, kind, name, uid in sorted(owners):
        found = climb.top(api_version, kind, name, uid)
        if found is None or isinstance(found, str):
            return found
        if (target.kind, target.name) not in found.passed:
            return (
                f"the owners of the pods lead to {found.kind.kind} {found.name}, not through "
                f"{target.kind} {target.name} their labels name"
            )
        tops[found.uid] = found
    if len(tops) != 1:
        names = ", ".join(sorted(f"{t.kind.kind} {t.name}" for t in tops.values()))
        return f"the pods judged belong to several workloads: {names}"
    return next(iter(tops.values()))


def record(why: str, now: float, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The annotations that say when and why the controller stopped a workload."""
    return {own.RECLAIMED_AT: str(int(now)), own.RECLAIM_REASON: why[:1000], **(extra or {})}


def _stop_patch(
    top: Top, subject: dict[str, Any], item: StopItem, why: str, now: float
) -> dict[str, Any] | str | None:
    """The patch that stops `subject` (the top as read last), None when already stopped, why
    not as a sentence."""
    if _uid(subject) != top.uid:
        return f"{top.kind.kind} {top.name} was created again since (uid {_uid(subject)})"
    spec = subject.get("spec") or {}
    if top.kind is LEADERWORKERSET:
        replicas = int(spec.get("replicas", 1))
        if replicas == 0:
            return None
        # Each group is a leader and its workers: a group added since the snapshot would be
        # stopped on no evidence.
        groups = {j.pod.labels.get(LWS_GROUP_LABEL) for j in item.pods}
        if replicas > len(groups):
            return (
                f"LeaderWorkerSet {top.name} wants {replicas} groups, pods of {len(groups)} "
                "were judged: groups added since"
            )
        extra = {own.RECLAIMED_REPLICAS: str(replicas)}
        return {"metadata": {"annotations": record(why, now, extra)}, "spec": {"replicas": 0}}
    if top.kind is RAYJOB and (
        spec.get("shutdownAfterJobFinishes") is not True or spec.get("clusterSelector")
    ):
        return (
            f"RayJob {top.name} cannot be suspended: KubeRay fails a suspended RayJob without "
            "shutdownAfterJobFinishes: true or with a clusterSelector"
        )
    if spec.get("suspend") is True:
        return None
    return {"metadata": {"annotations": record(why, now)}, "spec": {"suspend": True}}


def stop_operator_workload(
    rt: Runtime, target: Target, item: StopItem, why: str
) -> ObjectRef | str | None:
    """Stop the top of `target`'s chain (see the module docstring): its reference when written,
    None when gone or already stopped, why not (a sentence) when it is not the one judged or
    cannot be stopped."""
    top = resolve(rt, target, item)
    if top is None or isinstance(top, str):
        return top
    refused: list[str] = []

    def build(current: dict[str, Any] | None) -> dict[str, Any] | None:
        patch = _stop_patch(top, current or top.obj, item, why, rt.now)
        if isinstance(patch, str):
            refused.append(patch)
            return None
        return patch

    written = patch_fresh(rt.kube, top.path, top.obj["metadata"].get("resourceVersion"), build)
    if refused:
        return refused[-1]
    if written is None:
        rt.log.info("reclaim.already", target=f"{top.kind.kind}/{target.namespace}/{top.name}")
        return None
    return ObjectRef(
        api_version=top.kind.api_version,
        kind=top.kind.kind,
        namespace=target.namespace,
        name=top.name,
        uid=top.uid,
    )


def planned_stop(rt: Runtime, target: Target, item: StopItem) -> Top | str | None:
    """What a stop of `target` would write, read without writing (--dry-run): the top when it
    would be stopped, None when it is gone or stopped already, why not (a sentence)."""
    top = resolve(rt, target, item)
    if top is None or isinstance(top, str):
        return top
    patch = _stop_patch(top, top.obj, item, "", rt.now)
    return top if isinstance(patch, dict) else patch


def stop_subject(rt: Runtime, target: Target, item: StopItem) -> str:
    """What a stop of `target` writes, as --dry-run names it: for an operator's kind the top
    the climb reaches (reads only: a TrainJob above the JobSet its pods name, a RayJob above
    its RayCluster), with why nothing would be written when that is so; any other target as
    it is."""
    named = f"{target.kind} {target.namespace}/{target.name}"
    if operator_kind(target.api_version, target.kind) is None:
        return named
    top = planned_stop(rt, target, item)
    if isinstance(top, Top):
        return f"{top.kind.kind} {target.namespace}/{top.name}"
    return f"{named} (nothing would be written: {top or 'gone or stopped already'})"
