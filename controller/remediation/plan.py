"""Deciding one health pass: pure functions over the snapshot and the classified signals.

Like the driver upgrade (and the GPU Operator's upgrade library it copies): nodes grouped by
pool, one handler per state, each returning a `Step` (idempotent actions, then the next state),
each node moving at most one state per pass. Per pool, in this order:

1. every node's own handler (nodes already out of service advance, wait or escalate);
2. admissions: nodes with a fault that asks for action leave service, most severe remedy first
   (replace, reboot, reset, then hot), then by name, while the pool's throttle allows:
   `upgrade_slots(max_parallel=limit, in_progress=out, max_unavailable=limit, unavailable=out)`,
   where `limit` is `health.max_unavailable` of the pool's nodes and `out` counts the pool's
   nodes in any health state, and those admitted earlier in the pass. An alert storm across a
   pool therefore stops at the limit; the rest wait, reported.

The driver upgrade and this machine never act on the same node: a node the upgrade holds
(`upgrade-required` admitted, any state from `cordon-required` to `uncordon-required`, or
`upgrade-failed`) is not admitted here (its fault is reported and waits), and the upgrade does
not admit or mark a node with a health state (controller/upgrade/plan.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

from controller.observe.model import format_time
from controller.remediation import states
from controller.remediation.classify import (
    CONTAINED_ECC,
    CORDON,
    SEVERITY,
    Fault,
    NodeVerdict,
)
from controller.remediation.observe import HealthNode, HealthSnapshot, WorkPod
from controller.remediation.settings import HealthSettings
from controller.remediation.states import Detail
from controller.upgrade import states as upgrade_states
from controller.upgrade.consumers import Role
from controller.upgrade.handlers import SERVICE_OWNERS
from controller.upgrade.limits import upgrade_slots
from controller.upgrade.plan import natural_key
from controller.upgrade.steps import Cordon, CreateValidator, Uncordon
from controller.upgrade.validator import HEALTHY, UNHEALTHY, read_verdict, validator_pod
from fleet import labels as keys

RETURN = "<none>"
"""`Step.next_state` for "back in service": the state label is removed."""

UPGRADE_HOLDS = upgrade_states.IN_PROGRESS | {upgrade_states.UPGRADE_FAILED}


# --- actions (cordon, uncordon and creating the validator are the upgrade's own) -------------


@dataclass(frozen=True, kw_only=True)
class Taint:
    name: ClassVar[str] = "taint"
    value: str

    def describe(self, node: str) -> str:
        return f"taint node {node} {states.TAINT_KEY}={self.value}:NoSchedule"


@dataclass(frozen=True, kw_only=True)
class Untaint:
    name: ClassVar[str] = "untaint"

    def describe(self, node: str) -> str:
        return f"remove taint {states.TAINT_KEY} from node {node}"


@dataclass(frozen=True, kw_only=True)
class Condition:
    name: ClassVar[str] = "condition"
    healthy: bool
    reason: str
    message: str

    def describe(self, node: str) -> str:
        return f"set condition {states.CONDITION_TYPE}={self.healthy} ({self.reason}) on {node}"


@dataclass(frozen=True, kw_only=True)
class Evict:
    name: ClassVar[str] = "evict"
    pod: WorkPod
    why: str
    lost_seconds: float
    """Work since the pod's last checkpoint (or its start) that the eviction throws away."""

    def describe(self, node: str) -> str:
        return f"evict pod {self.pod.key} ({self.why})"


@dataclass(frozen=True, kw_only=True)
class DeleteValidator:
    name: ClassVar[str] = "delete-validator"
    pod: WorkPod

    def describe(self, node: str) -> str:
        return f"delete validator pod {self.pod.key}"


Action = Cordon | Uncordon | Taint | Untaint | Condition | Evict | CreateValidator | DeleteValidator


@dataclass(frozen=True, kw_only=True)
class Step:
    """One node's move: OPA is asked `decision` (the action's name) first, then `actions` run
    (each idempotent), then `next_state` is written with `detail`, `request` (the remediation
    hook's annotations; {} removes them) and a fresh timer; or only `detail` when the node
    stays."""

    node: HealthNode
    reason: str
    decision: str
    next_state: str | None = None
    actions: tuple[Action, ...] = ()
    detail: Detail | None = None
    request: dict[str, str] | None = None
    fault: Fault | None = None
    pool_nodes: int = 0
    pool_out: int = 0
    stamp: bool = False

    @property
    def state(self) -> str | None:
        return self.node.state

    @property
    def acts(self) -> bool:
        return bool(self.next_state or self.actions or self.detail is not None or self.stamp)

    @property
    def asks(self) -> bool:
        """Whether OPA is asked: every step that changes the node or its pods."""
        return bool(
            self.next_state or any(not isinstance(a, DeleteValidator) for a in self.actions)
        )


@dataclass(kw_only=True)
class PoolReport:
    name: str
    nodes: int
    limit: int
    out: int
    states: Counter[str] = field(default_factory=Counter)
    waiting: dict[str, str] = field(default_factory=dict)
    """Nodes with a fault that waits: the throttle, the upgrade, nothing known."""
    notes: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "pool": self.name,
            "nodes": self.nodes,
            "max_unavailable": self.limit,
            "out_of_service": self.out,
            "states": dict(sorted(self.states.items())),
            "waiting": dict(self.waiting),
            "notes": dict(self.notes),
        }


@dataclass(kw_only=True)
class Plan:
    now: float
    steps: list[Step] = field(default_factory=list)
    pools: dict[str, PoolReport] = field(default_factory=dict)
    verdicts: dict[str, NodeVerdict] = field(default_factory=dict)
    contained: list[tuple[str, Fault, list[WorkPod]]] = field(default_factory=list)
    """Contained ECC errors (Xid 94): the pods on the GPU, not the node, are told."""


@dataclass(frozen=True, kw_only=True)
class _Context:
    settings: HealthSettings
    snapshot: HealthSnapshot
    now: float


# --- planning --------------------------------------------------------------------------------


def plan_pass(
    snapshot: HealthSnapshot, verdicts: dict[str, NodeVerdict], settings: HealthSettings, now: float
) -> Plan:
    plan = Plan(now=now, verdicts=verdicts)
    ctx = _Context(settings=settings, snapshot=snapshot, now=now)
    by_pool: dict[str, list[HealthNode]] = {}
    for node in snapshot.nodes:
        by_pool.setdefault(node.pool, []).append(node)
    for pool in sorted(by_pool):
        nodes = sorted(by_pool[pool], key=lambda n: natural_key(n.name))
        steps, report = plan_pool(pool, nodes, verdicts, ctx)
        plan.steps += steps
        plan.pools[pool] = report
    return plan


def plan_pool(
    pool: str, nodes: list[HealthNode], verdicts: dict[str, NodeVerdict], ctx: _Context
) -> tuple[list[Step], PoolReport]:
    limit = ctx.settings.limit(len(nodes))
    out = sum(n.state in states.OUT_OF_SERVICE for n in nodes)
    report = PoolReport(name=pool, nodes=len(nodes), limit=limit, out=out)
    steps: list[Step] = []
    candidates: list[tuple[HealthNode, Fault]] = []
    for node in nodes:
        report.states[node.state or "in-service"] += 1
        verdict = verdicts.get(node.name)
        if node.state is not None and node.state not in states.STATES:
            report.notes[node.name] = f"unknown state label value {node.state!r}: left alone"
            continue
        handler = HANDLERS.get(node.state or "")
        step = handler(node, verdict, ctx) if handler else None
        if isinstance(step, Fault):
            if node.view.state in UPGRADE_HOLDS:
                report.waiting[node.name] = (
                    f"{step.reason}: waiting, the driver upgrade holds the node ({node.view.state})"
                )
            else:
                candidates.append((node, step))
            continue
        if step is not None:
            report.notes[node.name] = step.reason
            if step.acts:
                steps.append(step)
    candidates.sort(key=lambda c: (-_severity(c[1]), natural_key(c[0].name)))
    for node, fault in candidates:
        slots = upgrade_slots(
            max_parallel=limit, in_progress=out, max_unavailable=limit, unavailable=out
        )
        if slots <= 0:
            report.waiting[node.name] = (
                f"{fault.reason}: waiting, {out} of {limit} node(s) of the pool already out of service for health"
            )
            continue
        steps.append(_admit(node, fault, len(nodes), out, ctx))
        report.notes[node.name] = steps[-1].reason
        out += 1
    return steps, report


def _severity(fault: Fault) -> int:
    return SEVERITY.get(fault.remedy or "", 0)


def _admit(node: HealthNode, fault: Fault, pool_nodes: int, out: int, ctx: _Context) -> Step:
    hot = fault.remedy == CORDON
    actions: list[Action] = []
    if not node.view.unschedulable:
        actions.append(Cordon())
    if not hot:
        actions.append(Taint(value=fault.kind))
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


def ours_cordon(node: HealthNode) -> bool:
    return node.view.annotations.get(states.CORDONED_ANNOTATION) == "true"


def _camel(kind: str) -> str:
    return "".join(part.capitalize() for part in kind.split("-"))


def on_none(node: HealthNode, verdict: NodeVerdict | None, ctx: _Context) -> Step | Fault | None:
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


def on_hot(node: HealthNode, verdict: NodeVerdict | None, ctx: _Context) -> Step | None:
    if verdict is None or not verdict.known:
        return Step(
            node=node,
            decision="wait",
            reason="no fresh temperature: stays cordoned until every GPU is known to be cool",
        )
    worst = verdict.worst
    if worst is not None:
        # Already out of service: a fault needing remedy takes over without another slot.
        step = _admit(node, worst, 0, 0, ctx)
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
        return _return(
            node,
            ctx,
            "every GPU stayed at or below the model's cool line",
            decision="uncordon-cool",
        )
    return Step(
        node=node, decision="wait", reason="still hot, or not yet below the cool line (hysteresis)"
    )


def on_quarantined(node: HealthNode, verdict: NodeVerdict | None, ctx: _Context) -> Step:
    actions: list[Action] = []
    if not node.view.unschedulable:
        actions.append(Cordon())
    if not node.tainted:
        actions.append(Taint(value=str((node.detail.fault or {}).get("kind", "fault"))))
    return Step(
        node=node,
        decision="drain",
        next_state=states.DRAINING,
        actions=tuple(actions),
        detail=node.detail,
        reason="quarantined: running work gets its checkpoint window, then leaves with its gang",
    )


def _checkpoint(pod: WorkPod, now: float) -> float | None:
    text = pod.pod.annotations.get(keys.LAST_CHECKPOINT)
    try:
        at = float(text) if text is not None else None
    except ValueError:
        return None
    if at is None or not (0 < at <= now):
        return None
    return at


def _lost(pod: WorkPod, now: float) -> float:
    base = _checkpoint(pod, now) or pod.pod.started or now
    return max(0.0, now - base)


def on_draining(node: HealthNode, verdict: NodeVerdict | None, ctx: _Context) -> Step:
    pods = ctx.snapshot.pods_on(node.name)
    users = [p for p in pods if p.gpu and p.role is Role.WORKLOAD and not p.pod.terminal]
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
        attempt = node.detail.attempt + 1
        return Step(
            node=node,
            decision="request-remediation",
            next_state=states.REMEDIATING,
            detail=node.detail.but(attempt=attempt),
            request={
                states.REQUEST_ANNOTATION: remedy,
                states.REQUEST_ID_ANNOTATION: f"{node.name}-{attempt}",
            },
            reason=f"drained: requesting {remedy} through {states.REQUEST_ANNOTATION}",
        )
    evictions: list[Action] = []
    waiting: list[str] = []
    seen: set[str] = set()
    max_age = ctx.settings.checkpoint_max_age_seconds
    for pod in users:
        if pod.pod.deleting or pod.key in seen:
            continue
        members = (
            ctx.snapshot.gangs.get((pod.pod.namespace, pod.gang), [pod]) if pod.gang else [pod]
        )
        if pod not in members:
            members = [*members, pod]
        members = [m for m in members if m.active]
        checkpoints = [_checkpoint(m, ctx.now) for m in members]
        fresh = all(c is not None and ctx.now - c <= max_age for c in checkpoints)
        service = (
            pod.pod.owner is not None and pod.pod.owner.kind in SERVICE_OWNERS and not pod.gang
        )
        if service:
            why = f"replica of a {pod.pod.owner.kind if pod.pod.owner else ''}, started again elsewhere"
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


def _escalate(node: HealthNode, ctx: _Context, why: str) -> Step:
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
    attempt = node.detail.attempt + 1
    return Step(
        node=node,
        decision="request-remediation",
        next_state=states.REMEDIATING,
        detail=node.detail.but(remedy=following, attempt=attempt, history=history),
        request={
            states.REQUEST_ANNOTATION: following,
            states.REQUEST_ID_ANNOTATION: f"{node.name}-{attempt}",
        },
        reason=f"{remedy} did not help ({why}): escalating to {following}",
    )


def on_remediating(node: HealthNode, verdict: NodeVerdict | None, ctx: _Context) -> Step:
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
        return _escalate(node, ctx, f"the integration reported request {request_id} failed")
    if ctx.now >= since + ctx.settings.remediation_timeout_seconds:
        return _escalate(
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


def _validators(pods: list[WorkPod]) -> list[WorkPod]:
    return [
        p for p in pods if p.pod.labels.get(states.ATTEMPT_LABEL) is not None and not p.pod.deleting
    ]


def on_validating(node: HealthNode, verdict: NodeVerdict | None, ctx: _Context) -> Step:
    pods = ctx.snapshot.pods_on(node.name)
    attempt = node.detail.attempt
    validators = _validators(pods)
    stale = tuple(
        DeleteValidator(pod=p)
        for p in validators
        if p.pod.labels.get(states.ATTEMPT_LABEL) != str(attempt)
    )
    current = [p for p in validators if p.pod.labels.get(states.ATTEMPT_LABEL) == str(attempt)]
    since = node.since if node.since is not None else ctx.now
    timed_out = ctx.now >= since + ctx.settings.validation_timeout_seconds
    upgrade = ctx.settings.upgrade
    assert upgrade is not None
    driver = node.view.driver
    if driver is None or node.view.gpu_capacity <= 0:
        if timed_out:
            return _escalate(node, ctx, "the node reports no driver or no GPUs")
        return Step(
            node=node,
            decision="wait",
            actions=stale,
            reason="waiting for the node to report its driver and GPUs",
        )
    if not current:
        manifest = validator_pod(node.view, attempt=attempt, target=driver, settings=upgrade)
        manifest["metadata"]["name"] = f"{states.VALIDATOR_PREFIX}-{node.name}-{attempt}"[:253]
        manifest["metadata"]["labels"][states.ATTEMPT_LABEL] = str(attempt)
        manifest["metadata"]["labels"].pop(upgrade_states.VALIDATOR_ATTEMPT_LABEL, None)
        manifest["metadata"]["labels"][upgrade_states.APP_NAME_LABEL] = states.VALIDATOR_PREFIX
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
            return _escalate(
                node,
                ctx,
                f"validator {validator.key} did not finish in {ctx.settings.validation_timeout_seconds}s",
            )
        return Step(
            node=node,
            decision="wait",
            actions=stale,
            reason=f"validator {validator.key} is {validator.pod.phase}",
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
        return _return(
            node,
            ctx,
            f"validated: {outcome.reason}",
            decision="return",
            extra=(*stale, DeleteValidator(pod=validator)),
        )
    if outcome.kind == UNHEALTHY:
        return _escalate(node, ctx, f"validation failed: {outcome.reason}")
    if timed_out:
        return _escalate(node, ctx, outcome.reason)
    return Step(
        node=node,
        decision="validate",
        actions=(*stale, DeleteValidator(pod=validator)),
        detail=node.detail.but(attempt=attempt + 1),
        reason=f"{outcome.reason}; trying again (attempt {attempt + 1})",
    )


def _return(
    node: HealthNode, ctx: _Context, why: str, *, decision: str, extra: tuple[Action, ...] = ()
) -> Step:
    actions: list[Action] = list(extra)
    if (node.detail.cordoned or ours_cordon(node)) and node.view.unschedulable:
        actions.append(Uncordon())
    if node.tainted:
        actions.append(Untaint())
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


def on_needs_replacement(node: HealthNode, verdict: NodeVerdict | None, ctx: _Context) -> Step:
    return Step(
        node=node,
        decision="wait",
        reason=f"needs replacement: {(node.detail.fault or {}).get('reason')}; remove the {states.STATE_LABEL} label once replaced",
    )


HANDLERS: dict[str, Any] = {
    "": on_none,
    states.HOT: on_hot,
    states.QUARANTINED: on_quarantined,
    states.DRAINING: on_draining,
    states.REMEDIATING: on_remediating,
    states.VALIDATING: on_validating,
    states.NEEDS_REPLACEMENT: on_needs_replacement,
}


def contained_faults(
    snapshot: HealthSnapshot, verdicts: dict[str, NodeVerdict]
) -> list[tuple[str, Fault]]:
    return [(name, f) for name, v in verdicts.items() for f in v.faults if f.kind == CONTAINED_ECC]
