"""Carrying out a plan: each step's side effects, then its state, then an Event.

Per step: OPA's upgrade decision first when the step takes the node out of service (anything
but an explicit allow leaves the node where it is); then the actions in order, each idempotent
(a 404 on a delete, a 409 on creating the validator, a precondition miss on the driver pod all
mean "already done"); then, only when every action completed, the state label with a fresh
timer and the detail annotation, written with the resourceVersion last seen (a conflict re-reads
the node and writes only if it is still in the state the step was planned from); the server's
answer confirms the label; then an Event on the node. An eviction a PodDisruptionBudget refuses
(HTTP 429) leaves the step incomplete: the next pass tries again. Nodes admitted together
because they run one gang's pods are judged by OPA all before any is started: one refusal keeps
them all where they are.

Errors stay with their step (logged, counted); the other steps of the pass still run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

from controller.act.events import EventRecorder
from controller.act.runtime import Runtime
from controller.errors import ControllerError
from controller.log import Log
from controller.nodeflow import lock
from controller.nodeflow.act import (
    COMMON_STEPS,
    KEEP,
    Eviction,
    ask,
    delete_exactly,
    evict,
    node_path,
    node_ref,
    perform,
    show,
    write_node_state,
)
from controller.observe.kube import KubeClient
from controller.upgrade import states
from controller.upgrade.plan import Plan
from controller.upgrade.steps import (
    Evict,
    RestartDriver,
    Step,
)

CONCERN = "upgrade"
DECISION = "upgrade"

__all__ = ["ActReport", "act_on_plan", "node_path", "node_ref", "write_state"]


@dataclass(kw_only=True)
class ActReport:
    """What acting found that the snapshot could not show."""

    denied: dict[str, str] = field(default_factory=dict)
    """Node → OPA's reasons, for admissions refused."""
    refused_evictions: list[str] = field(default_factory=list)
    """Evictions a PodDisruptionBudget refused (HTTP 429), with the server's message."""
    moved: dict[str, str] = field(default_factory=dict)
    """Node → the state it was moved to."""
    failed_steps: int = 0


def opa_input(step: Step, now: float) -> dict[str, Any]:
    assert step.admission is not None
    return {
        "node": step.node.manifest(),
        "pool": step.node.pool,
        "pool_nodes": step.admission.pool_nodes,
        "pool_unavailable": step.admission.pool_unavailable,
        "now": int(now),
    }


def act_on_plan(rt: Runtime, plan: Plan) -> ActReport:
    report = ActReport()
    refused = _judge_groups(rt, plan.steps, report)
    refused |= _lock_groups(rt, plan.steps, refused, report)
    for step in plan.steps:
        if step.node.name in refused:
            continue
        outcome = rt.guarded(
            CONCERN, _action_name(step), step.node.name, partial(_carry_out, rt, step, report)
        )
        if outcome is None:
            report.failed_steps += 1
    return report


def _judge_groups(rt: Runtime, steps: list[Step], report: ActReport) -> set[str]:
    """Nodes admitted together (they run pods of one gang) are all admitted or none: OPA is
    asked about each before any is started, and one refusal (or OPA failing) keeps them all
    waiting. Returns the nodes not to start."""
    refused: set[str] = set()
    groups: dict[tuple[str, ...], list[Step]] = {}
    for step in steps:
        if step.admission is not None and step.admission.together:
            groups.setdefault(step.admission.together, []).append(step)
    for names, members in groups.items():
        why = None
        for step in members:
            try:
                decision = rt.opa.decide(DECISION, opa_input(step, rt.now))
            except ControllerError as error:
                why = f"OPA could not decide on {step.node.name}: {error}"
                break
            if not decision.allow:
                why = f"OPA denies starting {step.node.name}: {decision.because()}"
                break
        if why is None:
            continue
        refused.update(names)
        for step in members:
            report.denied[step.node.name] = why
            rt.summary.action(CONCERN, "admit", "denied")
        rt.log.info("upgrade.gang-denied", nodes=list(names), reason=why)
        if rt.dry_run:
            rt.out.write(
                f"DRY-RUN {CONCERN}: none of {', '.join(names)} (one gang's nodes) starts: {why}\n"
            )
    return refused


def _lock_groups(rt: Runtime, steps: list[Step], refused: set[str], report: ActReport) -> set[str]:
    """Nodes admitted together take their disruption locks together (`nodeflow.lock`): one
    node held by another actor, or being disrupted by Karpenter, keeps them all waiting."""
    kept: set[str] = set()
    for names in {s.admission.together for s in steps if s.admission and s.admission.together}:
        if refused.intersection(names):
            continue
        why = lock.take_all(rt, CONCERN, names, lock.UPGRADE)
        if why is not None:
            kept.update(names)
            for name in names:
                report.denied[name] = why
    return kept


def _action_name(step: Step) -> str:
    if step.next_state:
        return "state"
    return "wait" if step.actions else "record"


def _carry_out(rt: Runtime, step: Step, report: ActReport) -> bool:
    name = step.node.name
    if step.admission is not None:
        facts = opa_input(step, rt.now)
        denied = ask(rt, CONCERN, DECISION, name, facts, action="admit", what=f"starting {name}")
        if denied is not None:
            report.denied[name] = denied
            return False
    if lock.takes(lock.UPGRADE, step.state, step.next_state):
        held = lock.take(rt, CONCERN, name, lock.UPGRADE)
        if held is not None:
            report.denied[name] = held
            return False
    if rt.dry_run:
        show(
            rt,
            CONCERN,
            name,
            step.actions,
            transition=f"{step.state or 'no state'} -> {step.next_state}: {step.reason}"
            if step.next_state
            else None,
            record=step.reason if step.detail is not None or step.stamp else None,
        )
        return True
    version = step.node.resource_version
    complete = True
    for action in step.actions:
        if isinstance(action, COMMON_STEPS):
            version = perform(rt, CONCERN, action, name, step.reason) or version
        elif isinstance(action, Evict):
            complete = _evict(rt, action, name, report) and complete
        elif isinstance(action, RestartDriver):
            delete_exactly(rt.kube, action.pod)
            rt.done(CONCERN, "restart-driver", action.pod.key, step.reason, node=name)
            rt.events.emit(
                node_ref(name),
                "DriverUpgradeDriverPodDeleted",
                f"deleted driver pod {action.pod.key} so that its DaemonSet starts {step.target}",
            )
    if not complete:
        return True
    if step.next_state or step.detail is not None or step.stamp:
        following = write_state(
            rt.kube, step, rt.now, resource_version=version, log=rt.log, events=rt.events
        )
        if following is not None:
            rt.done(
                CONCERN,
                "state" if step.next_state else "record",
                name,
                step.reason,
                from_state=step.state,
                to_state=following,
            )
            if step.next_state:
                report.moved[name] = following
            if lock.releases(lock.UPGRADE, step.state, following):
                lock.release(rt, CONCERN, name, lock.UPGRADE)
    return True


def _evict(rt: Runtime, action: Evict, node: str, report: ActReport) -> bool:
    told = f"evicted from node {node} for a GPU driver upgrade: {action.why}"
    outcome, message = evict(
        rt,
        CONCERN,
        action.pod,
        node,
        grace_seconds=None,
        why=action.why,
        event=("DriverUpgradeEviction", told),
    )
    if outcome is Eviction.REFUSED:
        report.refused_evictions.append(f"{action.pod.key} on {node}: {message}")
    return outcome not in (Eviction.REPLACED, Eviction.REFUSED)


def write_state(
    kube: KubeClient,
    step: Step,
    now: float,
    *,
    resource_version: str | None,
    log: Log,
    events: EventRecorder,
) -> str | None:
    """Write the step's state, timer and detail; confirm; record an Event. Returns the state the
    node is in afterwards, or None when the node left the step's state meanwhile (nothing is
    written then)."""
    name = step.node.name
    metadata: dict[str, Any] = {}
    annotations: dict[str, str] = {}
    if step.next_state:
        metadata["labels"] = {states.STATE_LABEL: step.next_state}
    if step.next_state or step.stamp:
        annotations[states.SINCE_ANNOTATION] = str(int(now))
    if step.detail is not None:
        annotations[states.DETAIL_ANNOTATION] = step.detail.encode()
    if annotations:
        metadata["annotations"] = annotations
    written = write_node_state(
        kube,
        name,
        label=states.STATE_LABEL,
        expected=step.state,
        metadata=metadata,
        resource_version=resource_version,
        wanted=step.next_state or KEEP,
        log=log,
        concern=CONCERN,
        shown=step.state or "none",
    )
    if written is None:
        return None
    found = written.state
    if step.next_state:
        events.emit(
            node_ref(name),
            states.EVENT_REASONS[step.next_state],
            f"{step.state or 'no state'} -> {step.next_state}: {step.reason}",
            warning=step.failure,
        )
        log.info(
            "upgrade.transition",
            node=name,
            pool=step.node.pool,
            from_state=step.state,
            to_state=step.next_state,
            reason=step.reason,
            at=int(now),
        )
    return found
