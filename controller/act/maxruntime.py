"""Work past its maximum runtime: warn, then stop the workload.

The warning is state on the pod (`fleetplane.dev/runtime-warned-at`, `fleetplane.dev/stop-deadline`:
epoch seconds; the deadline is the earliest stop, the end of the grace), with a Warning Event
`MaxRuntimeWarning` saying when and how the workload will be stopped. The stop asks
`fleetplane/decisions/lifetime` (`runtime-stop`) for every pod of the workload, then stops it
as idle reclamation does for its owner kind (`act.idle.stop_if_allowed` over `stop_workload`:
scale to zero, suspend, abort a Volcano Job, delete a bare pod), with an Event
`MaxRuntimeStopped` on the workload and its pods.
"""

from __future__ import annotations

from controller.act.idle import hold, pod_ref, stop_if_allowed
from controller.act.pod_annotate import Outcome, annotate_judged_pod
from controller.act.runtime import Runtime
from controller.decide.maxruntime import RuntimeJudgement, RuntimePlan, StopPlan, Verdict
from controller.observe.model import format_time
from fleet import labels as keys

CONCERN = "lifetime"


def act_on_runtime(rt: Runtime, plan: RuntimePlan) -> set[str]:
    """Carry out the plan; the uids of the pods whose workload was stopped."""
    for verdict, count in plan.counts().items():
        rt.summary.set("lifetime_pods", count, check="max-runtime", verdict=verdict)
    for judgement in plan.judgements:
        if judgement.verdict is Verdict.NO_EVIDENCE:
            rt.log.info(
                "lifetime.runtime.no-evidence",
                pod=judgement.pod.key,
                reason=judgement.reason,
                action="none",
            )
        elif judgement.verdict in (Verdict.WAITING, Verdict.STOP):
            rt.log.info(
                "lifetime.runtime.judged",
                pod=judgement.pod.key,
                verdict=judgement.verdict.value,
                reason=judgement.reason,
            )
    hold(rt, plan.held, "lifetime.runtime", concern=CONCERN, action="runtime-stop")
    rt.each(
        plan.warn,
        lambda j: rt.guarded(CONCERN, "runtime-warn", j.pod.key, lambda: warn(rt, j)),
    )
    done = rt.each(
        plan.stop,
        lambda s: rt.guarded(CONCERN, "runtime-stop", s.target.key, lambda: stop(rt, s)),
    )
    return {j.pod.uid for item, ok in zip(plan.stop, done, strict=True) if ok for j in item.pods}


def warn(rt: Runtime, judgement: RuntimeJudgement) -> bool:
    pod = judgement.pod
    warned_at = int(rt.now)
    assert judgement.deadline is not None and judgement.stop_at is not None
    deadline = int(judgement.deadline)
    stop_at = int(judgement.stop_at)
    message = (
        f"{judgement.reason}. Its workload will be stopped after {format_time(stop_at)} "
        f"(grace ends {format_time(deadline)}); checkpoint before then"
    )
    if rt.dry_run:
        rt.would(CONCERN, "runtime-warn", pod.key, message)
        return True
    result = annotate_judged_pod(
        rt,
        pod,
        {keys.RUNTIME_WARNED_AT: str(warned_at), keys.STOP_DEADLINE: str(deadline)},
        unwanted=lambda annotations: keys.RUNTIME_WARNED_AT in annotations,  # warned meanwhile
    )
    if result.outcome is Outcome.GONE:
        rt.log.info("lifetime.runtime-warn.gone", pod=pod.key)
        return False
    if not result.written:
        replaced = [result.uid] if result.outcome is Outcome.REPLACED else []
        rt.log.info("lifetime.runtime-warn.already", pod=pod.key, replaced=replaced)
        return False
    rt.events.emit(pod_ref(judgement), "MaxRuntimeWarning", message, warning=True)
    rt.done(CONCERN, "runtime-warn", pod.key, judgement.reason, deadline=deadline, stop_at=stop_at)
    return True


def stop(rt: Runtime, item: StopPlan) -> bool:
    why = f"stopped past its maximum runtime ({item.target.method}): {item.pods[0].reason}"
    inputs = ((judgement, judgement.opa_input(rt.now)) for judgement in item.pods)
    return stop_if_allowed(
        rt,
        item,
        why,
        inputs,
        policy="lifetime",
        concern=CONCERN,
        action="runtime-stop",
        tag="maxrt",
        event_reason="MaxRuntimeStopped",
        failed_reason="MaxRuntimeStopFailed",
    )
