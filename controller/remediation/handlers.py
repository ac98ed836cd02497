"""One handler per health state (the GPU Operator's upgrade library's ApplyState, as for driver
upgrades): each looks at one node, its classified signals and its pods, and returns the `Step`
that moves it on, what it waits for, or (in service) the fault that makes it a candidate for
admission. Leaving service and draining are here; remediation, validation and the return to
service are in `recovery`."""

from __future__ import annotations

from typing import Any

from controller.nodeflow.consumers import SERVICE_OWNERS, Role
from controller.nodeflow.gangs import in_play
from controller.nodeflow.pods import PodView, checkpoint_at
from controller.observe.model import format_time
from controller.remediation import states
from controller.remediation.acting import on_remediating_any
from controller.remediation.classify import CORDON, Fault, NodeVerdict
from controller.remediation.observe import HealthNode
from controller.remediation.recovery import (
    on_needs_replacement,
    on_validating,
    ours_cordon,
    request_remedy,
    return_to_service,
)
from controller.remediation.states import Detail
from controller.remediation.steps import (
    Action,
    Condition,
    Context,
    Cordon,
    Evict,
    Step,
    Taint,
)


def admit(node: HealthNode, fault: Fault, pool_nodes: int, out: int, ctx: Context) -> Step:
    hot = fault.remedy == CORDON
    actions: list[Action] = []
    if not node.view.unschedulable:
        actions.append(Cordon())
    if not hot:
        actions.append(Taint(key=states.TAINT_KEY, value=fault.kind))
    actions.append(
        Condition(
            healthy=False, reason=_camel(fault.kind), message=f"GPU {fault.gpu}: {fault.reason}"
        )
    )
    return Step(
        node=node,
        decision="cordon-hot" if hot else "quarantine",
        next_state=states.HOT if hot else states.QUARANTINED,
        actions=tuple(actions),
        detail=Detail(
            fault=fault.as_dict(),
            remedy=None if hot else fault.remedy,
            attempt=node.detail.attempt,
            cordoned=not node.view.unschedulable or ours_cordon(node),
            started=int(ctx.now),
            history=node.detail.history[-5:],
        ),
        fault=fault,
        pool_nodes=pool_nodes,
        pool_out=out,
        reason=f"GPU {fault.gpu}: {fault.reason} [{fault.source}]",
    )


def _camel(kind: str) -> str:
    return "".join(part.capitalize() for part in kind.split("-"))


def on_none(node: HealthNode, verdict: NodeVerdict | None, ctx: Context) -> Step | Fault | None:
    """In service. A node whose label a person removed while the machine held it (after a
    replacement) is validated before it takes work; otherwise a fault asking for action makes
    the node a candidate for admission."""
    if node.detail.remedy and node.view.unschedulable and node.detail.cordoned:
        return Step(
            node=node,
            decision="validate",
            next_state=states.VALIDATING,
            detail=node.detail.but(attempt=node.detail.attempt + 1),
            reason="the state label was removed while the node was held: validating it before it takes work",
        )
    if verdict is None or not verdict.known:
        return None
    return verdict.worst or verdict.hot


def on_hot(node: HealthNode, verdict: NodeVerdict | None, ctx: Context) -> Step | None:
    if verdict is None or not verdict.known:
        return Step(
            node=node,
            decision="wait",
            reason="no fresh temperature: stays cordoned until every GPU is known to be cool",
        )
    worst = verdict.worst
    if worst is not None:
        # Already out of service: a fault needing remedy takes over without another slot.
        step = admit(node, worst, 0, 0, ctx)
        return Step(
            node=node,
            decision="quarantine",
            next_state=states.QUARANTINED,
            actions=tuple(a for a in step.actions if not isinstance(a, Cordon)),
            detail=step.detail.but(cordoned=node.detail.cordoned) if step.detail else None,
            fault=worst,
            reason=step.reason,
        )
    if verdict.cool:
        return return_to_service(
            node,
            ctx,
            "every GPU stayed at or below the model's cool line",
            decision="uncordon-cool",
        )
    return Step(
        node=node, decision="wait", reason="still hot, or not yet below the cool line (hysteresis)"
    )


def on_quarantined(node: HealthNode, verdict: NodeVerdict | None, ctx: Context) -> Step:
    actions: list[Action] = []
    if not node.view.unschedulable:
        actions.append(Cordon())
    if not node.tainted:
        actions.append(
            Taint(key=states.TAINT_KEY, value=str((node.detail.fault or {}).get("kind", "fault")))
        )
    return Step(
        node=node,
        decision="drain",
        next_state=states.DRAINING,
        actions=tuple(actions),
        detail=node.detail,
        reason="quarantined: running work gets its checkpoint window, then leaves with its gang",
    )


def _lost(pod: PodView, now: float) -> float:
    base = checkpoint_at(pod, now) or pod.started or now
    return max(0.0, now - base)


def on_draining(node: HealthNode, verdict: NodeVerdict | None, ctx: Context) -> Step:
    pods = ctx.snapshot.pods_on(node.name)
    users = [p for p in pods if p.gpu and p.role is Role.WORKLOAD and not p.terminal]
    since = node.since if node.since is not None else ctx.now
    window_over = ctx.now >= since + ctx.settings.checkpoint_window_seconds
    if not users:
        remedy = node.detail.remedy or states.GPU_RESET
        if remedy == states.REPLACE:
            return Step(
                node=node,
                decision="needs-replacement",
                next_state=states.NEEDS_REPLACEMENT,
                detail=node.detail,
                reason=f"drained; {(node.detail.fault or {}).get('reason')}: the GPU must be replaced by a person",
            )
        reason = f"drained: requesting {remedy} through {states.REQUEST_ANNOTATION}"
        return request_remedy(node, remedy, reason)
    evictions: list[Action] = []
    waiting: list[str] = []
    seen: set[str] = set()
    max_age = ctx.settings.checkpoint_max_age_seconds
    for pod in users:
        if pod.deleting or pod.key in seen:
            continue
        members = ctx.snapshot.gangs.get((pod.namespace, pod.gang), [pod]) if pod.gang else [pod]
        if pod not in members:
            members = [*members, pod]
        members = [m for m in members if in_play(m)]
        checkpoints = [checkpoint_at(m, ctx.now) for m in members]
        fresh = all(c is not None and ctx.now - c <= max_age for c in checkpoints)
        service = pod.owner_kind in SERVICE_OWNERS and not pod.gang
        if service:
            why = f"replica of a {pod.owner_kind}, started again elsewhere"
        elif fresh:
            why = (
                "checkpointed within the last "
                + f"{max_age}s"
                + (f", with its gang {pod.gang} ({len(members)} pods)" if pod.gang else "")
            )
        elif window_over:
            why = f"checkpoint window of {ctx.settings.checkpoint_window_seconds}s is over" + (
                f"; its gang {pod.gang} leaves whole" if pod.gang else ""
            )
        else:
            waiting.append(pod.key)
            continue
        for member in sorted(members, key=lambda m: m.key):
            if member.key in seen:
                continue
            seen.add(member.key)
            evictions.append(Evict(pod=member, why=why, lost_seconds=_lost(member, ctx.now)))
    deadline = format_time(since + ctx.settings.checkpoint_window_seconds)
    reason = (
        f"evicting {len(evictions)} pod(s)"
        if evictions
        else "waiting for evicted pods to terminate"
    ) + (
        f"; {len(waiting)} pod(s) have until {deadline} to checkpoint: {', '.join(sorted(waiting)[:5])}"
        if waiting
        else ""
    )
    return Step(
        node=node,
        decision="evict",
        actions=tuple(evictions),
        stamp=node.since is None,
        reason=reason,
    )


HANDLERS: dict[str, Any] = {
    "": on_none,
    states.HOT: on_hot,
    states.QUARANTINED: on_quarantined,
    states.DRAINING: on_draining,
    states.REMEDIATING: on_remediating_any,
    states.VALIDATING: on_validating,
    states.NEEDS_REPLACEMENT: on_needs_replacement,
}
