"""Gang stragglers: report (annotation + Warning Event), and restart where the policy allows.

Reporting writes `fleetplane.dev/straggler-reported-at` on the pod and a Warning Event
`Straggler` with the evidence, once per straggler window. Restarting (only for a straggler
already reported, opted in with `fleetplane.dev/straggler-action=restart`) asks
`fleetplane/decisions/lifetime` (`straggler-restart`), then deletes the pod with a uid
precondition so that its controller creates it again; the Event `StragglerRestarted` is written
once the delete succeeded (an Event outlives its pod).
"""

from __future__ import annotations

from controller.act.idle import pod_ref
from controller.act.pod_annotate import annotate_judged_pod
from controller.act.pod_delete import delete_judged_pod
from controller.act.runtime import Runtime
from controller.decide.stragglers import StragglerJudgement, StragglerPlan, Verdict
from fleet import labels as keys

CONCERN = "lifetime"


def act_on_stragglers(rt: Runtime, plan: StragglerPlan) -> set[str]:
    """Carry out the plan; the uids of the pods restarted."""
    for verdict in Verdict:
        rt.summary.set(
            "lifetime_pods",
            plan.counts().get(verdict.value, 0),
            check="straggler",
            verdict=verdict.value,
        )
    for judgement in plan.judgements:
        if judgement.verdict is Verdict.UNKNOWN:
            rt.log.info(
                "lifetime.straggler.unknown",
                pod=judgement.pod.key,
                reason=judgement.reason,
                action="none",
            )
        elif judgement.verdict is Verdict.REPORTED:
            rt.log.info(
                "lifetime.straggler.reported", pod=judgement.pod.key, reason=judgement.reason
            )
    for judgement in plan.held:
        why = "a bare pod: deleting it would not start it again"
        rt.log.info("lifetime.straggler-restart.held", pod=judgement.pod.key, reason=why)
        rt.summary.action(CONCERN, "straggler-restart", "held")
    rt.each(
        plan.report,
        lambda j: rt.guarded(CONCERN, "straggler-report", j.pod.key, lambda: report(rt, j)),
    )
    done = rt.each(
        plan.restart,
        lambda j: rt.guarded(CONCERN, "straggler-restart", j.pod.key, lambda: restart(rt, j)),
    )
    return {j.pod.uid for j, ok in zip(plan.restart, done, strict=True) if ok}


def report(rt: Runtime, judgement: StragglerJudgement) -> bool:
    pod = judgement.pod
    then = (
        "it will be restarted on a later pass if it still straggles, where the lifetime policy allows"
        if judgement.opted_in
        else f"reported only (label {keys.STRAGGLER_ACTION}=restart opts in to a restart)"
    )
    message = f"Straggler of its gang: {judgement.reason}; {then}"
    if rt.dry_run:
        rt.would(CONCERN, "straggler-report", pod.key, message)
        return True

    if not annotate_judged_pod(rt, pod, {keys.STRAGGLER_REPORTED_AT: str(int(rt.now))}).written:
        return False
    rt.events.emit(pod_ref(judgement), "Straggler", message, warning=True)
    rt.done(CONCERN, "straggler-report", pod.key, judgement.reason, gang=judgement.gang)
    return True


def restart(rt: Runtime, judgement: StragglerJudgement) -> bool:
    pod = judgement.pod
    decision = rt.opa.decide("lifetime", judgement.opa_input(rt.now, rt.fleet.lifetime))
    if not decision.allow:
        rt.log.info(
            "lifetime.straggler-restart.denied", pod=pod.key, reasons=list(decision.reasons)
        )
        rt.summary.action(CONCERN, "straggler-restart", "denied")
        return False
    why = f"straggler restarted (deleted for its controller to start again): {judgement.reason}; policy: {decision.because()}"
    return delete_judged_pod(
        rt,
        CONCERN,
        "straggler-restart",
        pod,
        pod_ref(judgement),
        why,
        done_event="StragglerRestarted",
        failed_event="StragglerRestartFailed",
        gang=judgement.gang,
    )
