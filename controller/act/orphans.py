"""Orphaned and failed work: mark, clear, reclaim (delete the pod).

Marking writes `fleetplane.dev/orphan-found-at` on the pod and a Warning Event `OrphanFound`
saying when it will be reclaimed. Reclaiming asks `fleetplane/decisions/lifetime`
(`orphan-reclaim`), reads the owner again (an owner that is back, or cannot be read now, stops
it: no evidence, no action), then deletes the pod with a uid precondition; the Event
`OrphanReclaimed` is written once the delete succeeded (an Event outlives its pod).
"""

from __future__ import annotations

from controller.act.idle import pod_ref
from controller.act.pod_annotate import annotate_judged_pod
from controller.act.pod_delete import delete_judged_pod
from controller.act.runtime import Runtime
from controller.decide.orphans import OrphanJudgement, OrphanPlan, Verdict, orphan_reason
from controller.observe.model import format_time
from controller.observe.owners import read_owner
from fleet import labels as keys

CONCERN = "lifetime"


def act_on_orphans(rt: Runtime, plan: OrphanPlan) -> set[str]:
    """Carry out the plan; the uids of the pods reclaimed."""
    for verdict, count in plan.counts().items():
        rt.summary.set("lifetime_pods", count, check="orphan", verdict=verdict)
    for judgement in plan.judgements:
        if judgement.verdict is Verdict.NO_EVIDENCE:
            rt.log.info(
                "lifetime.orphan.no-evidence",
                pod=judgement.pod.key,
                reason=judgement.reason,
                action="none",
            )
        elif judgement.verdict is Verdict.WAITING:
            rt.log.info("lifetime.orphan.waiting", pod=judgement.pod.key, reason=judgement.reason)
    rt.each(
        plan.clear,
        lambda j: rt.guarded(CONCERN, "orphan-clear", j.pod.key, lambda: _write(rt, j, None)),
    )
    rt.each(
        plan.mark,
        lambda j: rt.guarded(CONCERN, "orphan-mark", j.pod.key, lambda: _write(rt, j, rt.now)),
    )
    done = rt.each(
        plan.reclaim,
        lambda j: rt.guarded(CONCERN, "orphan-reclaim", j.pod.key, lambda: reclaim(rt, j)),
    )
    return {j.pod.uid for j, ok in zip(plan.reclaim, done, strict=True) if ok}


def _write(rt: Runtime, judgement: OrphanJudgement, found_at: float | None) -> bool:
    """Mark (found_at set) or clear (None) the pod."""
    pod = judgement.pod
    action = "orphan-mark" if found_at is not None else "orphan-clear"
    grace = rt.fleet.lifetime.orphan_grace_seconds
    if found_at is not None:
        message = (
            f"Orphaned work holding accelerators: {judgement.reason}. The pod will be deleted "
            f"after {format_time(found_at + grace)}"
        )
        reason, value = "OrphanFound", str(int(found_at))
    else:
        message = f"No longer orphaned: {judgement.reason}"
        reason, value = "OrphanCleared", None
    if rt.dry_run:
        rt.would(CONCERN, action, pod.key, message)
        return True

    if not annotate_judged_pod(rt, pod, {keys.ORPHAN_FOUND_AT: value}).written:
        return False
    rt.events.emit(pod_ref(judgement), reason, message, warning=found_at is not None)
    rt.done(CONCERN, action, pod.key, judgement.reason)
    return True


def reclaim(rt: Runtime, judgement: OrphanJudgement) -> bool:
    pod = judgement.pod
    decision = rt.opa.decide("lifetime", judgement.opa_input(rt.now))
    if not decision.allow:
        rt.log.info("lifetime.orphan-reclaim.denied", pod=pod.key, reasons=list(decision.reasons))
        rt.summary.action(CONCERN, "orphan-reclaim", "denied")
        return False
    # Read the owner again: created again, recovered, or unreadable since the snapshot means
    # the evidence no longer holds (an error here is raised: logged and counted, no action).
    assert judgement.owner is not None
    still = orphan_reason(judgement.owner, read_owner(rt.kube, judgement.owner))
    if still is None or still[0] != judgement.orphan:
        rt.log.info(
            "lifetime.orphan-reclaim.changed",
            pod=pod.key,
            reason=f"{judgement.owner} is no longer {judgement.orphan}",
            action="none",
        )
        rt.summary.action(CONCERN, "orphan-reclaim", "changed")
        return False
    why = f"orphaned pod reclaimed ({judgement.orphan}): {judgement.reason}; policy: {decision.because()}"
    return delete_judged_pod(
        rt,
        CONCERN,
        "orphan-reclaim",
        pod,
        pod_ref(judgement),
        why,
        done_event="OrphanReclaimed",
        failed_event="OrphanReclaimFailed",
        orphan=judgement.orphan,
    )
