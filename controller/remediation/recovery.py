"""The health states after the drain: a remediation requested and waited for (escalating
reset -> reboot -> replacement when one does not help), the GPUs validated by the shared
validator pod (`controller.nodeflow.validator`), and the return to service with what the fault
cost."""

from __future__ import annotations

from typing import Any

from controller.nodeflow.keys import APP_NAME_LABEL, VALIDATOR_ATTEMPT_LABEL
from controller.nodeflow.pods import PodView
from controller.nodeflow.validator import HEALTHY, UNHEALTHY, read_verdict, validator_pod
from controller.observe.model import format_time
from controller.remediation import states
from controller.remediation.classify import NodeVerdict
from controller.remediation.observe import HealthNode
from controller.remediation.states import Detail
from controller.remediation.steps import (
    RETURN,
    Action,
    Condition,
    Context,
    CreateValidator,
    DeleteValidator,
    Step,
    Uncordon,
    Untaint,
)


def ours_cordon(node: HealthNode) -> bool:
    return node.view.annotations.get(states.CORDONED_ANNOTATION) == "true"


def escalate(node: HealthNode, ctx: Context, why: str) -> Step:
    remedy = node.detail.remedy or states.GPU_RESET
    following = states.next_remedy(remedy)
    history = [
        *node.detail.history,
        {"remedy": remedy, "attempt": node.detail.attempt, "outcome": why, "at": int(ctx.now)},
    ][-8:]
    if following == states.REPLACE:
        return Step(
            node=node,
            decision="needs-replacement",
            next_state=states.NEEDS_REPLACEMENT,
            detail=node.detail.but(remedy=states.REPLACE, history=history),
            request={},
            reason=f"{remedy} did not help ({why}): the node needs a person (replacement)",
        )
    return request_remedy(
        node,
        following,
        f"{remedy} did not help ({why}): escalating to {following}",
        remedy=following,
        history=history,
    )


def request_remedy(node: HealthNode, requested: str, reason: str, **detail: Any) -> Step:
    """Ask for the remedy `requested` through the node's remediation-request annotation, as one
    more attempt (the request's id is `<node>-<attempt>`); `detail`: the detail's other fields
    that change with it."""
    attempt = node.detail.attempt + 1
    return Step(
        node=node,
        decision="request-remediation",
        next_state=states.REMEDIATING,
        detail=node.detail.but(attempt=attempt, **detail),
        request={
            states.REQUEST_ANNOTATION: requested,
            states.REQUEST_ID_ANNOTATION: f"{node.name}-{attempt}",
        },
        reason=reason,
    )


def on_remediating(node: HealthNode, verdict: NodeVerdict | None, ctx: Context) -> Step:
    annotations = node.view.annotations
    request_id = annotations.get(states.REQUEST_ID_ANNOTATION)
    done = annotations.get(states.DONE_ANNOTATION, "")
    since = node.since if node.since is not None else ctx.now
    remedy = node.detail.remedy or states.GPU_RESET
    if request_id and done == request_id:
        return Step(
            node=node,
            decision="validate",
            next_state=states.VALIDATING,
            detail=node.detail,
            reason=f"{remedy} done (request {request_id}): validating the GPUs",
        )
    if request_id and done == f"{request_id}:failed":
        return escalate(node, ctx, f"the integration reported request {request_id} failed")
    if ctx.now >= since + ctx.settings.remediation_timeout_seconds:
        return escalate(
            node,
            ctx,
            f"no completion of request {request_id} within {ctx.settings.remediation_timeout_seconds}s",
        )
    return Step(
        node=node,
        decision="wait",
        stamp=node.since is None,
        reason=f"waiting for {remedy} (request {request_id}) until {format_time(since + ctx.settings.remediation_timeout_seconds)}",
    )


def _validators(pods: list[PodView]) -> list[PodView]:
    return [p for p in pods if p.labels.get(states.ATTEMPT_LABEL) is not None and not p.deleting]


def on_validating(node: HealthNode, verdict: NodeVerdict | None, ctx: Context) -> Step:
    pods = ctx.snapshot.pods_on(node.name)
    attempt = node.detail.attempt
    validators = _validators(pods)
    stale = tuple(
        DeleteValidator(pod=p)
        for p in validators
        if p.labels.get(states.ATTEMPT_LABEL) != str(attempt)
    )
    current = [p for p in validators if p.labels.get(states.ATTEMPT_LABEL) == str(attempt)]
    since = node.since if node.since is not None else ctx.now
    timed_out = ctx.now >= since + ctx.settings.validation_timeout_seconds
    driver = node.view.driver
    if driver is None or node.view.gpu_capacity <= 0:
        if timed_out:
            return escalate(node, ctx, "the node reports no driver or no GPUs")
        return Step(
            node=node,
            decision="wait",
            actions=stale,
            reason="waiting for the node to report its driver and GPUs",
        )
    if not current:
        manifest = validator_pod(
            node.view, attempt=attempt, target=driver, settings=ctx.settings.workflow
        )
        manifest["metadata"]["name"] = f"{states.VALIDATOR_PREFIX}-{node.name}-{attempt}"[:253]
        manifest["metadata"]["labels"][states.ATTEMPT_LABEL] = str(attempt)
        manifest["metadata"]["labels"].pop(VALIDATOR_ATTEMPT_LABEL, None)
        manifest["metadata"]["labels"][APP_NAME_LABEL] = states.VALIDATOR_PREFIX
        return Step(
            node=node,
            decision="validate",
            actions=(*stale, CreateValidator(manifest=manifest)),
            reason=f"validating: started validator attempt {attempt}",
        )
    validator = current[0]
    terminated = validator.terminated
    if terminated is None:
        if timed_out:
            return escalate(
                node,
                ctx,
                f"validator {validator.key} did not finish in {ctx.settings.validation_timeout_seconds}s",
            )
        return Step(
            node=node,
            decision="wait",
            actions=stale,
            reason=f"validator {validator.key} is {validator.phase}",
        )
    outcome = read_verdict(terminated, target=driver, gpus=node.view.gpu_capacity)
    if outcome.kind == HEALTHY:
        if node.view.gpu_allocatable < node.view.gpu_capacity and not timed_out:
            return Step(
                node=node,
                decision="wait",
                actions=stale,
                reason=f"healthy; waiting for nvidia.com/gpu allocatable ({node.view.gpu_allocatable} of {node.view.gpu_capacity})",
            )
        return return_to_service(
            node,
            ctx,
            f"validated: {outcome.reason}",
            decision="return",
            extra=(*stale, DeleteValidator(pod=validator)),
        )
    if outcome.kind == UNHEALTHY:
        return escalate(node, ctx, f"validation failed: {outcome.reason}")
    if timed_out:
        return escalate(node, ctx, outcome.reason)
    return Step(
        node=node,
        decision="validate",
        actions=(*stale, DeleteValidator(pod=validator)),
        detail=node.detail.but(attempt=attempt + 1),
        reason=f"{outcome.reason}; trying again (attempt {attempt + 1})",
    )


def return_to_service(
    node: HealthNode, ctx: Context, why: str, *, decision: str, extra: tuple[Action, ...] = ()
) -> Step:
    actions: list[Action] = list(extra)
    if (node.detail.cordoned or ours_cordon(node)) and node.view.unschedulable:
        actions.append(Uncordon())
    if node.tainted:
        actions.append(Untaint(key=states.TAINT_KEY))
    actions.append(Condition(healthy=True, reason="GpuHealthy", message=why))
    started = node.detail.started or int(node.since or ctx.now)
    gpus = node.view.gpu_capacity
    lost_gpu_hours = round(gpus * max(0.0, ctx.now - started) / 3600, 3)
    work_lost = round(
        sum(e.get("gpus", 0) * e.get("lost_seconds", 0) for e in node.detail.evicted.values())
        / 3600,
        3,
    )
    entry = {
        "fault": (node.detail.fault or {}).get(
            "kind", "thermal" if node.state == states.HOT else None
        ),
        "remedy": node.detail.remedy,
        "started": started,
        "returned": int(ctx.now),
        "gpu_hours_out_of_service": lost_gpu_hours,
        "gpu_hours_of_work_lost": work_lost,
    }
    return Step(
        node=node,
        decision=decision,
        next_state=RETURN,
        actions=tuple(actions),
        detail=Detail(attempt=node.detail.attempt, history=[*node.detail.history, entry][-8:]),
        request={},
        reason=f"back in service: {why}; the fault cost {lost_gpu_hours} GPU-hours out of service and {work_lost} GPU-hours of work since checkpoints",
    )


def on_needs_replacement(node: HealthNode, verdict: NodeVerdict | None, ctx: Context) -> Step:
    return Step(
        node=node,
        decision="wait",
        reason=f"needs replacement: {(node.detail.fault or {}).get('reason')}; remove the {states.STATE_LABEL} label once replaced",
    )
