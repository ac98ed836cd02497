"""Idle reclamation: warn, clear a warning, reclaim.

State lives on the pod (`fleetplane.dev/idle-warned-at`, `fleetplane.dev/reclaim-deadline`,
epoch seconds), so a warning survives restarts and a later pass picks up where the last one
stopped. Reclaiming picks the least destructive way for the owner (see `decide.workloads.Target`)
and is done only on an explicit allow from `fleetplane/decisions/reclaim` for every pod of the
workload, and only on the owner those pods name (its uid) with no more replicas wanted than pods
were judged: an owner created again under the same name, or scaled up since the snapshot, would
be stopped with pods nobody judged. Volcano Jobs have no suspend field: the controller creates a
`bus.volcano.sh/v1alpha1` Command with action `AbortJob` (Volcano kills the pods and keeps the Job, which can be resumed
with a `ResumeJob` Command); the Command's name is derived from the warning time, so a repeated
pass finds it already there instead of aborting twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from controller import annotations as own
from controller.act.events import ObjectRef
from controller.act.owners import stop_operator_workload, stop_subject
from controller.act.pod_annotate import Outcome, annotate_judged_pod
from controller.act.pod_delete import delete_exactly
from controller.act.runtime import Runtime
from controller.act.writes import patch_fresh
from controller.decide.idle import IdlePlan, PodJudgement, ReclaimPlan, Verdict
from controller.decide.operator_kinds import operator_kind
from controller.decide.workloads import VOLCANO_JOB_API, Judged, StopItem, Target
from controller.errors import ConflictError, NotFoundError
from controller.observe.kube import object_path, pod_path
from controller.observe.model import format_time
from fleet import labels as keys

CONCERN = "idle"


def pod_ref(judgement: Judged) -> ObjectRef:
    pod = judgement.pod
    return ObjectRef(
        api_version="v1", kind="Pod", namespace=pod.namespace, name=pod.name, uid=pod.uid
    )


def act_on_idle(rt: Runtime, plan: IdlePlan) -> set[str]:
    """Carry out the plan; returns the uids of pods whose workload was reclaimed."""
    for verdict, count in plan.counts().items():
        rt.summary.set("idle_pods", count, verdict=verdict)
    for judgement in plan.judgements:
        if judgement.verdict in IDLE_VERDICTS:
            pod = judgement.pod
            team = rt.fleet.namespaces.get(pod.namespace)
            for resource, devices in pod.demand.items():
                if team is not None and devices:
                    rt.summary.inc(
                        "team_gpus",
                        devices,
                        state="idle",
                        team=team,
                        resource=resource,
                        workload_type=pod.workload_type or "unlabelled",
                    )
    # A debug line per running pod (80,000 a pass at 100,000 pods) is built only when debug
    # lines are written (Log.debugging).
    debugging = rt.log.debugging()
    for judgement in plan.judgements:
        if judgement.verdict == Verdict.NO_EVIDENCE:
            rt.log.info(
                "idle.no-evidence", pod=judgement.pod.key, reason=judgement.reason, action="none"
            )
        elif debugging and judgement.verdict != Verdict.NOT_RUNNING:
            rt.log.debug(
                "idle.judged",
                pod=judgement.pod.key,
                verdict=judgement.verdict.value,
                reason=judgement.reason,
            )
    hold(rt, plan.held, "idle")
    rt.each(plan.clear, lambda j: _guard(rt, "clear", j.pod.key, lambda: clear_warning(rt, j)))
    rt.each(plan.warn, lambda j: _guard(rt, "warn", j.pod.key, lambda: warn(rt, j)))
    done = rt.each(
        plan.reclaim, lambda i: _guard(rt, "reclaim", i.target.key, lambda: reclaim(rt, i))
    )
    return {j.pod.uid for item, ok in zip(plan.reclaim, done, strict=True) if ok for j in item.pods}


def hold(
    rt: Runtime,
    held: Iterable[tuple[Target, str]],
    logged_as: str,
    *,
    concern: str = CONCERN,
    action: str = "reclaim",
) -> None:
    """The stops held back, with why: logged (`<logged_as>.held`) and counted as `action`'s;
    also the lifetime concern's runtime stops (`act.maxruntime`)."""
    for target, reason in held:
        rt.log.info(f"{logged_as}.held", target=target.key, reason=reason)
        rt.summary.action(concern, action, "held")
        if rt.dry_run:  # not an action, but why one a reader may expect is not taken
            rt.out.write(f"DRY-RUN {concern}: would hold {target.key}: {reason}\n")


def _guard(rt: Runtime, action: str, target: str, run: Any) -> bool:
    return bool(rt.guarded(CONCERN, action, target, run))


def _uid_of(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def warn(rt: Runtime, judgement: PodJudgement) -> bool:
    pod, rule = judgement.pod, judgement.rule
    assert rule is not None
    warned_at = int(rt.now)
    deadline = warned_at + rule.grace_seconds
    message = (
        f"{judgement.reason}. It will be reclaimed after {format_time(deadline)} unless its GPUs "
        f"become busy (utilisation above {rule.util_threshold_percent:g}%)"
    )
    if rt.dry_run:
        rt.would(CONCERN, "warn", pod.key, message)
        return True

    def warned_in_window(annotations: dict[str, str]) -> bool:
        # Re-read after a conflict: still not warned inside this window? (A pod created again
        # under the same name is another workload, with no evidence against it: not written.)
        previous = annotations.get(keys.IDLE_WARNED_AT)
        return bool(
            previous
            and previous.isdigit()
            and rt.now - rule.window_seconds <= int(previous) <= rt.now
        )

    result = annotate_judged_pod(
        rt,
        pod,
        {keys.IDLE_WARNED_AT: str(warned_at), keys.RECLAIM_DEADLINE: str(deadline)},
        unwanted=warned_in_window,
    )
    if result.outcome is Outcome.GONE:
        rt.log.info("idle.warn.gone", pod=pod.key)
        return False
    if result.outcome is Outcome.REPLACED:
        rt.log.info("idle.warn.replaced", pod=pod.key, uid=pod.uid, new_uid=result.uid)
        return False
    if not result.written:
        rt.log.info("idle.warn.already", pod=pod.key)
        return False
    rt.events.emit(pod_ref(judgement), "IdleWarning", message, warning=True)
    rt.done(CONCERN, "warn", pod.key, judgement.reason, deadline=deadline)
    return True


def clear_warning(rt: Runtime, judgement: PodJudgement) -> bool:
    pod = judgement.pod
    message = f"Idle warning cleared: {judgement.reason}"
    if rt.dry_run:
        rt.would(CONCERN, "clear", pod.key, message)
        return True

    def cleared(annotations: dict[str, str]) -> bool:
        return keys.IDLE_WARNED_AT not in annotations and keys.RECLAIM_DEADLINE not in annotations

    if not annotate_judged_pod(
        rt, pod, {keys.IDLE_WARNED_AT: None, keys.RECLAIM_DEADLINE: None}, unwanted=cleared
    ).written:
        return False
    rt.events.emit(pod_ref(judgement), "IdleWarningCleared", message)
    rt.done(CONCERN, "clear", pod.key, judgement.reason)
    return True


def reclaim(rt: Runtime, item: ReclaimPlan) -> bool:
    def asked(judgement: PodJudgement) -> dict[str, Any]:
        assert judgement.facts is not None
        return {
            "pod": judgement.pod.manifest(),
            "workload_type": judgement.pod.workload_type,
            "idle": judgement.facts.opa_input(warned_at=judgement.warned_at, now=rt.now),
        }

    why = f"idle GPUs reclaimed ({item.target.method}): {item.pods[0].reason}"
    inputs = ((judgement, asked(judgement)) for judgement in item.pods)
    if not stop_if_allowed(rt, item, why, inputs, policy="reclaim"):
        return False
    if not rt.dry_run:
        _count_reclaimed(rt, item)
    return True


def stop_if_allowed(
    rt: Runtime,
    item: StopItem,
    why: str,
    inputs: Iterable[tuple[Judged, dict[str, Any]]],
    *,
    policy: str,
    concern: str = CONCERN,
    action: str = "reclaim",
    tag: str = "idle",
    event_reason: str = "IdleReclaimed",
    failed_reason: str = "IdleReclaimFailed",
) -> bool:
    """Stop the workload of `item` (`stop_workload`) on an explicit allow of
    `fleetplane/decisions/<policy>` for each of its pods (`inputs`: each pod's judgement and
    input, asked one by one until one is denied), the policy's reasons added to `why`; then
    `event_reason` on the workload and its pods. True when stopped (or it would be, in a dry
    run). Shared with the lifetime concern's runtime stop (`act.maxruntime`), whose `concern`,
    `action` and Event reasons these are (see `stop_workload`)."""
    target = item.target
    reasons: list[str] = []
    for judgement, opa_input in inputs:
        decision = rt.opa.decide(policy, opa_input)
        if not decision.allow:
            rt.log.info(
                f"{concern}.{action}.denied",
                target=target.key,
                pod=judgement.pod.key,
                reasons=list(decision.reasons),
            )
            rt.summary.action(concern, action, "denied")
            return False
        reasons.extend(decision.reasons)
    if reasons:
        why += f"; policy: {'; '.join(dict.fromkeys(reasons))}"
    if rt.dry_run:
        rt.would(concern, f"{action} ({target.method})", stop_subject(rt, target, item), why)
        return True
    ref = stop_workload(
        rt, item, why, tag=tag, event_reason=event_reason, failed_reason=failed_reason
    )
    if ref is None:
        return False
    # Only once the stop is done: an Event outlives a deleted pod (it names its uid).
    rt.events.emit(ref, event_reason, why, warning=True)
    if ref.kind != "Pod":
        for judgement in item.pods:
            rt.events.emit(pod_ref(judgement), event_reason, f"{why} (via {ref})", warning=True)
    rt.done(concern, action, target.key, why, method=target.method)
    return True


IDLE_VERDICTS = frozenset({Verdict.WARN, Verdict.WAITING, Verdict.RECLAIM})
"""Verdicts of pods judged idle (warned, waiting out the grace, or due): their GPUs count as
idle in `fleetplane_team_gpus{state="idle"}`."""


def _count_reclaimed(rt: Runtime, item: ReclaimPlan) -> None:
    """The GPUs a reclaim freed, and the idle GPU-hours and spend it ended, estimated as one
    more idle window at the pod's price (docs/contracts.md, "Controller metrics")."""
    for judgement in item.pods:
        pod = judgement.pod
        team = rt.fleet.namespaces.get(pod.namespace)
        node = rt.nodes.get(pod.node_name or "")
        if team is None:
            continue
        model = rt.fleet.model_of_node(node.labels) if node is not None else None
        capacity_type = node.capacity_type if node is not None else ""
        window_hours = (judgement.rule.window_seconds if judgement.rule else 0) / 3600.0
        for resource, devices in pod.demand.items():
            if not devices:
                continue
            labels = {
                "team": team,
                "resource": resource,
                "workload_type": pod.workload_type or "unlabelled",
                "model": model.name if model else "",
                "capacity_type": capacity_type,
            }
            rt.summary.inc("reclaimed_gpus", devices, **labels)
            rt.summary.inc("reclaimed_gpu_hours", devices * window_hours, **labels)
            price = model.price_per_hour_usd.get(capacity_type) if model else None
            if price is not None and model is not None and model.resource == resource:
                rt.summary.inc("reclaim_savings_usd", devices * window_hours * price, **labels)


def stop_workload(
    rt: Runtime,
    item: StopItem,
    why: str,
    *,
    tag: str = "idle",
    event_reason: str = "IdleReclaimed",
    failed_reason: str = "IdleReclaimFailed",
) -> ObjectRef | None:
    """Stop the workload of `item` the least destructive way for its owner (`Target.method`;
    an operator's workload through its own API, `act.owners`);
    the reference of what was written, or None when nothing was (gone, changed, already done).
    Shared with the lifetime concern (act.lifetime): `tag` names the Volcano Command, and
    `event_reason` is its reason; `failed_reason` that of the Event of a failed pod delete."""
    target = item.target
    if operator_kind(target.api_version, target.kind) is not None:
        stopped = stop_operator_workload(rt, target, item, why)
        if isinstance(stopped, str):
            _changed(rt, target, stopped)
            return None
        return stopped
    if target.method == "scale-to-zero":
        return _scale_to_zero(rt, target, item, why)
    if target.method == "suspend":
        return _suspend_job(rt, target, item, why)
    if target.method == "abort":
        return _abort_volcano_job(rt, target, item, why, tag=tag, event_reason=event_reason)
    if target.method == "delete":
        return _delete_pod(rt, target, item, why, failed_reason=failed_reason)
    raise ValueError(f"no way to stop {target.key} ({target.method})")


def _record(why: str, rt: Runtime, extra: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        own.RECLAIMED_AT: str(int(rt.now)),
        own.RECLAIM_REASON: why[:1000],
        **(extra or {}),
    }


def _judged_owner_uids(item: StopItem, name: str) -> set[str]:
    """The uids the snapshot's pods name for their owner `name` (normally one)."""
    return {
        j.pod.owner.uid for j in item.pods if j.pod.owner is not None and j.pod.owner.name == name
    }


def _not_judged(kind: str, name: Any, obj: dict[str, Any], expected: set[str]) -> str | None:
    """Why `obj` is not the owner whose pods were judged (its uid is none of `expected`: it was
    deleted and created again under the same name); None when it is."""
    uid = _uid_of(obj)
    if uid in expected:
        return None
    return (
        f"{kind} {name} has uid {uid}, the pods judged belong to "
        f"{', '.join(sorted(expected))}: created again since"
    )


def _changed(rt: Runtime, target: Target, reason: str) -> None:
    """The owner is no longer the one judged: no write, logged and counted."""
    rt.log.info("idle.reclaim.changed", target=target.key, reason=reason, action="none")
    rt.summary.action(CONCERN, "reclaim", "changed")


def _resolve_scalable(
    rt: Runtime, target: Target, item: StopItem
) -> tuple[str, str, dict[str, Any], set[str]] | str | None:
    """Follow Pod → ReplicaSet → Deployment through ownerReferences: (kind, path, object, the
    uids the object may have); None when it is gone; why, when it is not the one judged."""
    if target.kind == "Deployment" and target.via:
        rs_path = object_path("apps/v1", "replicasets", target.namespace, target.via)
        try:
            rs = rt.kube.get(rs_path)
        except NotFoundError:
            return None
        judged = _judged_owner_uids(item, target.via)
        if (why := _not_judged("ReplicaSet", target.via, rs, judged)) is not None:
            return why
        owner = next(
            (
                ref
                for ref in (rs.get("metadata") or {}).get("ownerReferences") or ()
                if ref.get("controller") and ref.get("kind") == "Deployment"
            ),
            None,
        )
        if owner is None:
            return "ReplicaSet", rs_path, rs, judged
        path = object_path("apps/v1", "deployments", target.namespace, owner["name"])
        expected = {str(owner.get("uid") or "")}
    else:
        plural = {
            "Deployment": "deployments",
            "StatefulSet": "statefulsets",
            "ReplicaSet": "replicasets",
        }[target.kind]
        path = object_path("apps/v1", plural, target.namespace, target.name)
        expected = _judged_owner_uids(item, target.name)
    try:
        obj = rt.kube.get(path)
    except NotFoundError:
        return None
    return obj["kind"], path, obj, expected


def _scale_to_zero(rt: Runtime, target: Target, item: StopItem, why: str) -> ObjectRef | None:
    resolved = _resolve_scalable(rt, target, item)
    if resolved is None:
        rt.log.info("idle.reclaim.gone", target=target.key)
        return None
    if isinstance(resolved, str):
        _changed(rt, target, resolved)
        return None
    kind, path, obj, expected = resolved
    metadata = obj.get("metadata") or {}
    judged = len(item.pods)
    refused: list[str] = []

    def build(current: dict[str, Any] | None) -> dict[str, Any] | None:
        subject = current or obj
        # Still the object whose pods were judged, with no more replicas than were judged?
        # Another one under the same name, or replicas added since the snapshot, would be
        # stopped without evidence.
        if (other := _not_judged(kind, metadata.get("name"), subject, expected)) is not None:
            refused.append(other)
            return None
        spec = subject.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        if replicas == 0:
            return None
        if replicas > judged:
            refused.append(
                f"{kind} {metadata.get('name')} wants {replicas} replicas, {judged} pod(s) were "
                "judged idle: replicas added since"
            )
            return None
        return {
            "metadata": {"annotations": _record(why, rt, {own.RECLAIMED_REPLICAS: str(replicas)})},
            "spec": {"replicas": 0},
        }

    written = patch_fresh(rt.kube, path, metadata.get("resourceVersion"), build)
    if refused:
        _changed(rt, target, refused[-1])
        return None
    if written is None:
        rt.log.info(
            "idle.reclaim.already", target=f"{kind}/{target.namespace}/{metadata.get('name')}"
        )
        return None
    return ObjectRef(
        api_version="apps/v1",
        kind=kind,
        namespace=target.namespace,
        name=metadata.get("name", target.name),
        uid=metadata.get("uid", ""),
    )


def _suspend_job(rt: Runtime, target: Target, item: StopItem, why: str) -> ObjectRef | None:
    path = object_path("batch/v1", "jobs", target.namespace, target.name)
    try:
        job = rt.kube.get(path)
    except NotFoundError:
        return None

    expected = _judged_owner_uids(item, target.name)
    refused: list[str] = []

    def build(current: dict[str, Any] | None) -> dict[str, Any] | None:
        subject = current or job
        if (other := _not_judged("Job", target.name, subject, expected)) is not None:
            refused.append(other)
            return None
        if (subject.get("spec") or {}).get("suspend") is True:
            return None
        return {"metadata": {"annotations": _record(why, rt)}, "spec": {"suspend": True}}

    written = patch_fresh(rt.kube, path, job["metadata"].get("resourceVersion"), build)
    if refused:
        _changed(rt, target, refused[-1])
        return None
    if written is None:
        return None
    return ObjectRef(
        api_version="batch/v1",
        kind="Job",
        namespace=target.namespace,
        name=target.name,
        uid=job["metadata"].get("uid", ""),
    )


def _abort_volcano_job(
    rt: Runtime, target: Target, item: StopItem, why: str, *, tag: str, event_reason: str
) -> ObjectRef | None:
    path = object_path(VOLCANO_JOB_API, "jobs", target.namespace, target.name)
    try:
        job = rt.kube.get(path)
    except NotFoundError:
        return None
    uid = job["metadata"].get("uid", "")
    expected = _judged_owner_uids(item, target.name)
    if (other := _not_judged("Volcano Job", target.name, job, expected)) is not None:
        _changed(rt, target, other)
        return None
    warned = min(int(j.warned_at or rt.now) for j in item.pods)
    name = f"{target.name[:40]}-{tag}-{warned}"
    command = {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {
            "name": name,
            "namespace": target.namespace,
            "ownerReferences": [
                {"apiVersion": VOLCANO_JOB_API, "kind": "Job", "name": target.name, "uid": uid}
            ],
        },
        "action": "AbortJob",
        "target": {"apiVersion": VOLCANO_JOB_API, "kind": "Job", "name": target.name, "uid": uid},
        "reason": event_reason,
        "message": why[:1000],
    }
    try:
        rt.kube.create(
            object_path("bus.volcano.sh/v1alpha1", "commands", target.namespace, None), command
        )
    except ConflictError:
        rt.log.info("idle.reclaim.already", target=target.key, command=name)
        return None
    # The abort is done (Volcano acts on the Command): the IdleReclaimed Event must still be
    # written, so a failure of the record on the Job is logged and counted, not raised.
    rt.guarded(
        CONCERN,
        "record",
        target.key,
        lambda: patch_fresh(
            rt.kube, path, None, lambda _: {"metadata": {"annotations": _record(why, rt)}}
        ),
    )
    return ObjectRef(
        api_version=VOLCANO_JOB_API,
        kind="Job",
        namespace=target.namespace,
        name=target.name,
        uid=uid,
    )


def _delete_pod(
    rt: Runtime, target: Target, item: StopItem, why: str, *, failed_reason: str
) -> ObjectRef | None:
    judgement = item.pods[0]
    ref = pod_ref(judgement)
    # The stop's Event (IdleReclaimed, MaxRuntimeStopped) is recorded by `stop_if_allowed`
    # after the delete succeeded.
    path = pod_path(target.namespace, target.name)
    uid = judgement.pod.uid
    if not delete_exactly(
        rt, path, uid, ref, why, failed_reason, "idle.reclaim", target=target.key
    ):
        return None
    return ref
