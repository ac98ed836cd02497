"""Carrying out a health plan: OPA first, then the step's actions, then its state, then an Event.

Per step (the upgrade's order; the side effects are `controller.nodeflow.act`): every step that changes the node or
its pods asks `fleetplane/decisions/health` with the step's action; anything but an explicit
allow (a deny, OPA down, a malformed answer) leaves the node where it is. Then the actions in
order, each idempotent (cordoning a cordoned node, a taint or condition patched by its key, an
eviction of a pod already gone, a validator that already exists); then, only when every action
completed, the state label, the timer, the detail and the remediation request, written with
the resourceVersion last seen (a conflict re-reads the node and writes only if it is still in
the state the step was planned from); the answer must carry the new label; then the Event.
Under `--dry-run` OPA is asked and every action printed; nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from controller.act.events import EventRecorder
from controller.act.runtime import Runtime
from controller.log import Log
from controller.nodeflow import lock
from controller.nodeflow.act import (
    COMMON_STEPS,
    KEEP,
    Eviction,
    ask,
    create_validator,
    delete_exactly,
    evict,
    node_path,
    perform,
    show,
    write_node_state,
)
from controller.nodeflow.act import node_ref as node_ref
from controller.observe.kube import KubeClient
from controller.observe.model import format_time
from controller.remediation import states
from controller.remediation.plan import Plan
from controller.remediation.steps import (
    RETURN,
    Condition,
    EndRemedy,
    Evict,
    Relabel,
    StartRemedy,
    Step,
)

CONCERN = "health"
DECISION = "health"


@dataclass(kw_only=True)
class ActReport:
    denied: dict[str, str] = field(default_factory=dict)
    refused_evictions: list[str] = field(default_factory=list)
    moved: dict[str, str] = field(default_factory=dict)
    """Node -> the state it was moved to (`in-service` when returned)."""
    returned: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Node -> what its fault cost (the history entry written on return)."""
    failed_steps: int = 0


def opa_input(step: Step, now: float) -> dict[str, Any]:
    fault = step.fault.as_dict() if step.fault else (step.node.detail.fault or {})
    return {
        "action": step.decision,
        "node": step.node.view.manifest(),
        "pool": step.node.pool,
        "pool_nodes": step.pool_nodes,
        "pool_out_of_service": step.pool_out,
        "state": step.state,
        "next_state": None if step.next_state in (None, RETURN) else step.next_state,
        "returns": step.next_state == RETURN,
        "fault": fault,
        "remedy": (step.detail.remedy if step.detail else None) or step.node.detail.remedy,
        "evictions": [
            {"pod": a.pod.key, "why": a.why, "lost_seconds": int(a.lost_seconds)}
            for a in step.actions
            if isinstance(a, Evict)
        ],
        "now": int(now),
        **({} if step.gpu_pods is None else {"gpu_pods": step.gpu_pods}),
    }


def act_on_plan(rt: Runtime, plan: Plan) -> ActReport:
    report = ActReport()
    for step in plan.steps:
        outcome = rt.guarded(
            CONCERN, step.decision, step.node.name, partial(_carry_out, rt, step, report)
        )
        if outcome is None:
            report.failed_steps += 1
    return report


def _carry_out(rt: Runtime, step: Step, report: ActReport) -> bool:
    name = step.node.name
    if step.asks:
        facts = opa_input(step, rt.now)
        what = f"{step.decision} on {name}"
        denied = ask(rt, CONCERN, DECISION, name, facts, action=step.decision, what=what)
        if denied is not None:
            report.denied[name] = denied
            return False
    following = None if step.next_state == RETURN else step.next_state
    if step.next_state and lock.takes(lock.REMEDIATION, step.state, following):
        held = lock.take(rt, CONCERN, name, lock.REMEDIATION)
        if held is not None:
            report.denied[name] = held
            return False
    if rt.dry_run:
        shown = "in service" if step.next_state == RETURN else step.next_state
        transition = f"{step.state or 'in service'} -> {shown}: {step.reason}"
        show(rt, CONCERN, name, step.actions, transition=transition if step.next_state else None)
        return True
    version: str | None = step.node.view.resource_version
    complete = True
    evicted: dict[str, dict[str, Any]] = {}
    planned = {
        a.pod.key: {
            "gpus": a.pod.devices,
            "lost_seconds": int(a.lost_seconds),
            "at": int(rt.now),
        }
        for a in step.actions
        if isinstance(a, Evict)
    }
    if planned:
        # The work an eviction throws away is recorded before the eviction, so a pass killed
        # right after it still counts it (a refused eviction is recorded again, not twice).
        base = step.detail or step.node.detail
        record = replace(step, next_state=None, stamp=False, request=None)
        write_state(
            rt.kube,
            record,
            rt.now,
            detail=base.but(evicted={**base.evicted, **planned}),
            resource_version=version,
            log=rt.log,
            events=rt.events,
        )
        version = None
    for action in step.actions:
        if isinstance(action, COMMON_STEPS):
            mark = states.CORDONED_ANNOTATION
            version = perform(rt, CONCERN, action, name, step.reason, cordon_mark=mark) or version
        elif isinstance(action, Condition):
            stamp = format_time(rt.now)
            condition = {
                "type": states.CONDITION_TYPE,
                "status": "True" if action.healthy else "False",
                "reason": action.reason,
                "message": action.message[:1024],
                "lastTransitionTime": stamp,
                "lastHeartbeatTime": stamp,
            }
            rt.kube.strategic_patch(
                node_path(name) + "/status", {"status": {"conditions": [condition]}}
            )
            rt.done(CONCERN, "condition", name, step.reason, healthy=action.healthy)
        elif isinstance(action, Evict):
            if _evict(rt, action, name, report):
                evicted[action.pod.key] = planned[action.pod.key]
            else:
                complete = False
        elif isinstance(action, Relabel | StartRemedy | EndRemedy):
            _remedy_step(rt, action, name, step.reason)
    detail: Any = step.detail
    if planned:
        base = detail or step.node.detail
        detail = base.but(evicted={**base.evicted, **planned})
    if not complete:
        return True
    if step.next_state or detail is not None or step.stamp:
        written = write_state(
            rt.kube,
            step,
            rt.now,
            detail=detail,
            resource_version=version,
            log=rt.log,
            events=rt.events,
        )
        if written is not None and step.next_state:
            report.moved[name] = "in-service" if step.next_state == RETURN else step.next_state
            rt.done(
                CONCERN,
                "state",
                name,
                step.reason,
                from_state=step.state,
                to_state=report.moved[name],
            )
            if step.next_state == RETURN and detail is not None and detail.history:
                report.returned[name] = detail.history[-1]
            if lock.releases(lock.REMEDIATION, step.state, following):
                lock.release(rt, CONCERN, name, lock.REMEDIATION)
    return True


REMEDY_EVENTS = {states.GPU_RESET: "GpuResetStarted", states.REBOOT: "NodeRebootStarted"}


def _remedy_step(
    rt: Runtime, action: Relabel | StartRemedy | EndRemedy, node: str, why: str
) -> None:
    """The remedy's own side effects (`health.recovery: act`), each idempotent: the GPU
    Operator's deploy labels, the privileged remedy pod (an Event on the node and a log line
    name what it runs), its deletion."""
    if isinstance(action, Relabel):
        rt.kube.merge_patch(node_path(node), {"metadata": {"labels": action.labels}})
        rt.done(CONCERN, "relabel", node, why, labels=action.labels)
    elif isinstance(action, StartRemedy):
        create_validator(rt.kube, action.manifest)
        rt.done(CONCERN, action.remedy, node, why, pod=action.key)
        rt.events.emit(
            node_ref(node),
            REMEDY_EVENTS[action.remedy],
            f"{action.describe(node)}: {why}",
            warning=True,
        )
    else:
        delete_exactly(rt.kube, action.pod)
        rt.done(CONCERN, "end-remedy", action.pod.key, why, node=node)


def _evict(rt: Runtime, action: Evict, node: str, report: ActReport) -> bool:
    lost = int(action.lost_seconds)
    told = (
        f"evicted from node {node}, whose GPU is being remediated: {action.why}; "
        f"{lost}s of work since the last checkpoint"
    )
    outcome, message = evict(
        rt,
        CONCERN,
        action.pod,
        node,
        grace_seconds=rt.settings.eviction_grace_seconds,
        why=action.why,
        event=("GpuHealthEviction", told),
        lost_seconds=lost,
    )
    if outcome is Eviction.REFUSED:
        report.refused_evictions.append(f"{action.pod.key}: {message}")
    return outcome not in (Eviction.REPLACED, Eviction.REFUSED)


def write_state(
    kube: KubeClient,
    step: Step,
    now: float,
    *,
    detail: Any,
    resource_version: str | None,
    log: Log,
    events: EventRecorder,
) -> str | None:
    """Write the step's state (or remove it: back in service), timer, detail and remediation
    request; confirm; Event. None when the node left the step's state meanwhile."""
    name = step.node.name
    metadata: dict[str, Any] = {}
    annotations: dict[str, str | None] = {}
    if step.next_state:
        following = None if step.next_state == RETURN else step.next_state
        metadata["labels"] = {states.STATE_LABEL: following}
        annotations[states.SINCE_ANNOTATION] = None if following is None else str(int(now))
    elif step.stamp:
        annotations[states.SINCE_ANNOTATION] = str(int(now))
    if detail is not None:
        annotations[states.DETAIL_ANNOTATION] = detail.encode()
    if step.request is not None:
        for key in (
            states.REQUEST_ANNOTATION,
            states.REQUEST_ID_ANNOTATION,
            states.DONE_ANNOTATION,
        ):
            annotations[key] = step.request.get(key)
    if annotations:
        metadata["annotations"] = annotations
    wanted = None if step.next_state == RETURN else step.next_state
    written = write_node_state(
        kube,
        name,
        label=states.STATE_LABEL,
        expected=step.state,
        metadata=metadata,
        resource_version=resource_version,
        wanted=wanted if step.next_state else KEEP,
        log=log,
        concern=CONCERN,
        shown=step.state or "in service",
    )
    if written is None:
        return None
    found = written.state
    if step.next_state:
        reason_key = None if step.next_state == RETURN else step.next_state
        events.emit(
            node_ref(name),
            states.EVENT_REASONS[reason_key],
            f"{step.state or 'in service'} -> {wanted or 'in service'}: {step.reason}",
            warning=reason_key in states.WARNING_STATES,
        )
        log.info(
            "health.transition",
            node=name,
            pool=step.node.pool,
            from_state=step.state,
            to_state=wanted,
            reason=step.reason,
            at=int(now),
        )
    return found or "in-service"
