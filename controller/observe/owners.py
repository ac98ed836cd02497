"""The owners of accelerator pods, read after the snapshot: do they exist, has a Job failed, does
a Job bound its own runtime? The lifetime concern's evidence (decide.orphans, decide.maxruntime).

One GET per distinct owner of the snapshot's non-terminal accelerator pods (run `workers` at a
time), never a list of every ReplicaSet or Job of the cluster: the owners of accelerator pods are
a small share of those (old ReplicaSets, CPU Jobs), and a GET answers exactly the question asked
(404 is proof of absence). Owners are read after the pods: an owner created after the pod list
is no owner of a listed pod, so a pod is never called orphaned for an object the lists raced.

Pods whose controller let go of them (the owner deleted with `propagationPolicy: Orphan`: the
garbage collector removes the ownerReference) are recognised by what their controller left on
them: a batch Job's `batch.kubernetes.io/controller-uid` label, a Volcano Job's
`volcano.sh/job-name` label. Anything else without an owner is a bare pod, not an orphan.

An owner that could not be read (timeout, 5xx, 403, a malformed answer) is unknown (absent from
the result): unknown is never evidence of an orphan.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from controller.errors import ControllerError, NotFoundError
from controller.log import Log
from controller.observe.facts import (
    KNOWN_KINDS,
    VOLCANO_JOB_API,
    OwnerKey,
)
from controller.observe.kube import KubeClient, object_path
from controller.observe.model import Pod


@dataclass(frozen=True, slots=True, kw_only=True)
class OwnerFacts:
    """What the API answered about one owner.

    exists: an object of that name with the uid the pod expects (any uid when it names none).
    found_uid: the uid of the object found under the name, "" when none.
    failed: a batch Job with condition Failed=True, or a Volcano Job in phase Failed.
    active_deadline_seconds: a batch Job's spec.activeDeadlineSeconds (its own runtime bound).
    """

    exists: bool
    found_uid: str = ""
    failed: bool = False
    failed_reason: str = ""
    active_deadline_seconds: int | None = None


def owner_key(pod: Pod) -> OwnerKey | None:
    """The owner a pod names (its controller reference), or the Job that let go of it; None
    for a bare pod or an owner kind whose existence is not looked up. Worked out once per pod
    when it is observed (`observe.facts.owner_of`)."""
    return pod.owner_key


def facts_from_object(key: OwnerKey, obj: dict[str, Any]) -> OwnerFacts:
    metadata = obj.get("metadata") or {}
    found_uid = str(metadata.get("uid") or "")
    exists = not key.uid or found_uid == key.uid
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    failed, why = False, ""
    deadline = None
    if key.api_version == "batch/v1" and key.kind == "Job":
        for condition in status.get("conditions") or ():
            if (
                isinstance(condition, dict)
                and condition.get("type") == "Failed"
                and condition.get("status") == "True"
            ):
                failed = True
                why = str(condition.get("reason") or "Failed")
        value = spec.get("activeDeadlineSeconds")
        if isinstance(value, int) and not isinstance(value, bool):
            deadline = value
    elif key.api_version == VOLCANO_JOB_API:
        state = status.get("state") or {}
        phase = state.get("phase") if isinstance(state, dict) else None
        if phase == "Failed":
            failed, why = True, str(state.get("reason") or "Failed")
    return OwnerFacts(
        exists=exists,
        found_uid=found_uid,
        failed=failed and exists,
        failed_reason=why,
        active_deadline_seconds=deadline,
    )


def read_owner(kube: KubeClient, key: OwnerKey) -> OwnerFacts:
    """The facts of one owner; NotFound is an answer (it does not exist), any other error is
    raised (the owner is unknown)."""
    plural = KNOWN_KINDS[(key.api_version, key.kind)]
    try:
        obj = kube.get(object_path(key.api_version, plural, key.namespace, key.name))
    except NotFoundError:
        return OwnerFacts(exists=False)
    if not isinstance(obj, dict):
        raise ControllerError(f"{key}: the answer is not an object")
    return facts_from_object(key, obj)


def read_owners(
    kube: KubeClient, pods: Iterable[Pod], *, log: Log | None = None, workers: int = 8
) -> dict[OwnerKey, OwnerFacts]:
    """The facts of the owners of the non-terminal pods; owners that could not be read are
    absent (logged as `lifetime.owner-unknown`)."""
    log = log or Log()
    keys = sorted(
        {key for pod in pods if not pod.terminal and (key := owner_key(pod)) is not None},
        key=str,
    )

    def one(key: OwnerKey) -> tuple[OwnerKey, OwnerFacts | None]:
        try:
            return key, read_owner(kube, key)
        except ControllerError as error:
            log.warning("lifetime.owner-unknown", owner=str(key), error=str(error))
            return key, None

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(keys) or 1))) as pool:
        found = list(pool.map(one, keys))
    return {key: facts for key, facts in found if facts is not None}
