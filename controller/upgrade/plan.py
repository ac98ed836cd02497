"""Deciding one upgrade pass: pure functions over the snapshot, no I/O.

`plan_pass` groups the snapshot's nodes by pool and runs one handler per state over them (the
GPU Operator's upgrade library, ApplyState). A handler returns a `Step`: the idempotent side
effects to carry out, then the state to move to (or none: the node waits, and the step says
what for). Each node moves at most one state per pass. Per pool, in this order:

1. every node's own handler (the nodes in the rollout advance, wait or fail);
2. the halt: while a node of the pool is failed, or fails in this pass, nothing new starts, no
   driver is restarted, and nodes still on the old driver go back into service;
3. admissions: inside a maintenance window, nodes in `upgrade-required` leave service in a fixed
   order while `limits.upgrade_slots` allows (each still needs OPA's allow, asked when acting);
4. marking: nodes whose driver differs from the target become `upgrade-required` (inside a
   window, and not while halted).

Admission order, one comparator: (1) nodes already unschedulable for another reason first (they
take no unavailability slot), (2) then by name, numbers compared as numbers (`pool-2` before
`pool-10`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

from controller.observe.model import DisruptionBudget, format_time
from controller.upgrade import states
from controller.upgrade.consumers import Role
from controller.upgrade.limits import in_any_window, next_opening, upgrade_slots
from controller.upgrade.observe import (
    NodeView,
    PodView,
    UpgradeSnapshot,
    checkpoint_at,
    pdb_blocking,
)
from controller.upgrade.settings import PoolTarget, UpgradeSettings
from controller.upgrade.states import Detail
from controller.upgrade.validator import (
    HEALTHY,
    UNHEALTHY,
    read_verdict,
    validator_pod,
)

SERVICE_OWNERS = frozenset({"ReplicaSet", "StatefulSet"})
"""Owners whose pods are replicas of a service: their controller starts them elsewhere, so they
are evicted at once (their PodDisruptionBudget decides how fast) instead of waited for."""


# --- steps -----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Cordon:
    name: ClassVar[str] = "cordon"

    def describe(self, node: str) -> str:
        return f"cordon node {node}"


@dataclass(frozen=True, kw_only=True)
class Uncordon:
    name: ClassVar[str] = "uncordon"

    def describe(self, node: str) -> str:
        return f"uncordon node {node}"


@dataclass(frozen=True, kw_only=True)
class Evict:
    name: ClassVar[str] = "evict"
    pod: PodView
    why: str
    budget: str | None = None
    """A PodDisruptionBudget that allowed no disruption in the snapshot (the eviction is still
    tried: the API server has the current count)."""

    def describe(self, node: str) -> str:
        return f"evict pod {self.pod.key} from {node} ({self.why})"


@dataclass(frozen=True, kw_only=True)
class RestartDriver:
    name: ClassVar[str] = "restart-driver"
    pod: PodView

    def describe(self, node: str) -> str:
        return f"delete driver pod {self.pod.key} on {node} (uid {self.pod.uid})"


@dataclass(frozen=True, kw_only=True)
class CreateValidator:
    name: ClassVar[str] = "create-validator"
    manifest: dict[str, Any]

    @property
    def key(self) -> str:
        meta = self.manifest["metadata"]
        return f"{meta['namespace']}/{meta['name']}"

    def describe(self, node: str) -> str:
        return f"create validator pod {self.key} on {node}"


@dataclass(frozen=True, kw_only=True)
class DeleteValidator:
    name: ClassVar[str] = "delete-validator"
    pod: PodView

    def describe(self, node: str) -> str:
        return f"delete validator pod {self.pod.key}"


Action = Cordon | Uncordon | Evict | RestartDriver | CreateValidator | DeleteValidator


@dataclass(frozen=True, kw_only=True)
class Admission:
    """The numbers OPA's upgrade decision is asked with. `pool_unavailable` counts the pool's
    unavailable nodes other than this one, including those admitted earlier in this pass."""

    pool_nodes: int
    pool_unavailable: int


@dataclass(frozen=True, kw_only=True)
class Step:
    """One node's move in a pass: `actions` first (each idempotent), then `next_state` with
    `detail` and a fresh timer, or only `detail` when the node stays where it is."""

    node: NodeView
    target: str
    reason: str
    next_state: str | None = None
    actions: tuple[Action, ...] = ()
    detail: Detail | None = None
    admission: Admission | None = None
    failure: bool = False
    stamp: bool = False
    """Write the timer annotation although the state does not change (it was missing)."""

    @property
    def acts(self) -> bool:
        return bool(self.next_state or self.actions or self.detail is not None or self.stamp)

    @property
    def state(self) -> str | None:
        return self.node.state


# --- reports ---------------------------------------------------------------------------------


@dataclass(kw_only=True)
class NodeLine:
    name: str
    state: str
    since: float | None
    driver: str | None
    note: str


@dataclass(kw_only=True)
class PoolReport:
    """A pool's progress as seen in the snapshot, and what holds it back."""

    name: str
    target: str
    nodes: int
    max_unavailable: int
    unavailable: int
    in_progress: int
    max_parallel: int
    window_open: bool
    next_window: float | None
    states: Counter[str] = field(default_factory=Counter)
    failed: dict[str, str] = field(default_factory=dict)
    blocks: list[str] = field(default_factory=list)
    lines: list[NodeLine] = field(default_factory=list)

    @property
    def halted(self) -> bool:
        return bool(self.failed)

    @property
    def complete(self) -> bool:
        """Every node runs the target and is out of the rollout."""
        return all(line.driver == self.target and line.state in _SETTLED for line in self.lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "pool": self.name,
            "target": self.target,
            "nodes": self.nodes,
            "complete": self.complete,
            "halted": self.halted,
            "max_unavailable": self.max_unavailable,
            "unavailable": self.unavailable,
            "in_progress": self.in_progress,
            "max_parallel": self.max_parallel,
            "window_open": self.window_open,
            "next_window": format_time(self.next_window) if self.next_window else None,
            "states": dict(sorted(self.states.items())),
            "failed": dict(self.failed),
            "blocks": list(self.blocks),
            "nodes_detail": [
                {
                    "node": line.name,
                    "state": line.state,
                    "since": format_time(line.since) if line.since else None,
                    "driver": line.driver,
                    "note": line.note,
                }
                for line in self.lines
            ],
        }


CURRENT = "current"
"""Pseudo-state of a node without a state label that already runs the target."""
OUTDATED = "outdated"
"""Pseudo-state of a node without a state label whose driver differs from the target."""
UNKNOWN_DRIVER = "driver-unknown"
"""Pseudo-state of a node without driver labels: never started."""
_SETTLED = frozenset({CURRENT, states.UPGRADE_DONE})


@dataclass(kw_only=True)
class Plan:
    now: float
    steps: list[Step] = field(default_factory=list)
    pools: dict[str, PoolReport] = field(default_factory=dict)


# --- planning --------------------------------------------------------------------------------


def natural_key(name: str) -> tuple[Any, ...]:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def admission_order(node: NodeView) -> tuple[Any, ...]:
    return (not node.unschedulable, natural_key(node.name))


@dataclass(frozen=True, kw_only=True)
class _Context:
    settings: UpgradeSettings
    target: str
    now: float
    pdbs: list[DisruptionBudget]


def plan_pass(snapshot: UpgradeSnapshot, settings: UpgradeSettings, now: float) -> Plan:
    plan = Plan(now=now)
    by_pool: dict[str, list[NodeView]] = {}
    for node in snapshot.nodes:
        if node.pool in settings.pools:
            by_pool.setdefault(node.pool, []).append(node)
    window_open = in_any_window(settings.windows, now)
    for name in sorted(settings.pools):
        nodes = sorted(by_pool.get(name, []), key=lambda n: natural_key(n.name))
        steps, report = plan_pool(
            settings.pools[name], nodes, snapshot, settings, now, window_open=window_open
        )
        plan.steps += steps
        plan.pools[name] = report
    return plan


def plan_pool(
    pool: PoolTarget,
    nodes: list[NodeView],
    snapshot: UpgradeSnapshot,
    settings: UpgradeSettings,
    now: float,
    *,
    window_open: bool,
) -> tuple[list[Step], PoolReport]:
    ctx = _Context(settings=settings, target=pool.driver_version, now=now, pdbs=snapshot.pdbs)
    limit = pool.limit(len(nodes))
    report = PoolReport(
        name=pool.name,
        target=pool.driver_version,
        nodes=len(nodes),
        max_unavailable=limit,
        unavailable=sum(n.unavailable for n in nodes),
        in_progress=sum(n.state in states.IN_PROGRESS for n in nodes),
        max_parallel=settings.max_parallel,
        window_open=window_open,
        next_window=None if window_open else next_opening(settings.windows, now),
    )
    notes: dict[str, str] = {}
    steps: dict[str, Step] = {}

    # 1. Each node's own handler.
    for node in nodes:
        report.states[_shown_state(node, ctx.target)] += 1
        if node.state == states.UPGRADE_FAILED:
            report.failed[node.name] = _failure_reason(node)
            notes[node.name] = f"failed: {report.failed[node.name]}"
            continue
        handler = HANDLERS.get(node.state or "")
        if handler is None:
            if node.state is not None and node.state not in states.STATES:
                notes[node.name] = f"unknown state label value {node.state!r}: left alone"
            continue
        step = handler(node, snapshot.pods_on(node.name), ctx)
        if step is None:
            continue
        if step.failure:
            report.failed[node.name] = step.reason
        steps[node.name] = step
        notes[node.name] = step.reason

    # 2. The halt.
    if report.failed:
        failed = ", ".join(sorted(report.failed))
        report.blocks.append(
            f"halted: node(s) {failed} failed; nothing new starts until an operator clears them "
            f"(fleetplane controller upgrade clear NODE)"
        )
        for node in nodes:
            if node.state in states.BEFORE_DRIVER_RESTART and not _driver_restarted(
                node, snapshot.pods_on(node.name)
            ):
                steps[node.name] = Step(
                    node=node,
                    target=ctx.target,
                    next_state=states.UNCORDON_REQUIRED,
                    detail=node.detail,
                    reason=f"rollout halted by failed node(s) {failed}: returning to service "
                    f"on driver {node.driver}",
                )
                notes[node.name] = steps[node.name].reason

    # 3. Admissions.
    candidates = sorted(
        (
            n
            for n in nodes
            if n.state == states.UPGRADE_REQUIRED and n.driver != ctx.target and n.driver
        ),
        key=admission_order,
    )
    if candidates and not report.failed:
        if not window_open:
            opens = format_time(report.next_window) if report.next_window else "never"
            report.blocks.append(f"maintenance window closed: next opens {opens}")
            for node in candidates:
                notes[node.name] = "waiting for a maintenance window"
        else:
            _admit(candidates, nodes, steps, notes, report, ctx, limit)
    elif candidates:
        for node in candidates:
            notes[node.name] = "waiting: the pool's rollout is halted"

    # 4. Marking.
    if window_open and not report.failed:
        for node in nodes:
            if node.name in steps or node.state not in (None, states.UPGRADE_DONE):
                continue
            if node.driver and node.driver != ctx.target and not node.detail.failure:
                steps[node.name] = Step(
                    node=node,
                    target=ctx.target,
                    next_state=states.UPGRADE_REQUIRED,
                    detail=Detail(
                        target=ctx.target, previous=node.driver, attempt=node.detail.attempt
                    ),
                    reason=f"driver {node.driver} differs from the pool's target {ctx.target}",
                )
                notes[node.name] = steps[node.name].reason
    for node in nodes:
        if node.driver is None and node.state is None:
            notes.setdefault(
                node.name, "no nvidia.com/cuda.driver.* labels: driver unknown, not started"
            )

    for node in nodes:
        report.lines.append(
            NodeLine(
                name=node.name,
                state=_shown_state(node, ctx.target),
                since=node.since if node.state else None,
                driver=node.driver,
                note=notes.get(node.name, ""),
            )
        )
        step = steps.get(node.name)
        if step is not None:
            for action in step.actions:
                if isinstance(action, Evict) and action.budget:
                    report.blocks.append(
                        f"node {node.name}: eviction of {action.pod.key} is refused by "
                        f"PodDisruptionBudget {action.budget} for now (0 disruptions allowed)"
                    )
    # Nodes already in the rollout first, then admissions in the order they were counted.
    ordered = [
        steps[n.name]
        for n in nodes
        if n.name in steps and steps[n.name].acts and steps[n.name].admission is None
    ]
    ordered += [steps[n.name] for n in candidates if n.name in steps and steps[n.name].admission]
    return ordered, report


def _admit(
    candidates: list[NodeView],
    nodes: list[NodeView],
    steps: dict[str, Step],
    notes: dict[str, str],
    report: PoolReport,
    ctx: _Context,
    limit: int,
) -> None:
    unavailable, in_progress = report.unavailable, report.in_progress
    limited = 0
    for node in candidates:
        if not node.ready:
            notes[node.name] = "NotReady: not started until it is Ready again"
            continue
        already = node.unschedulable  # already out of service: takes no unavailability slot
        free = (
            ctx.settings.max_parallel - in_progress
            if already
            else upgrade_slots(
                max_parallel=ctx.settings.max_parallel,
                in_progress=in_progress,
                max_unavailable=limit,
                unavailable=unavailable,
            )
        )
        if free <= 0:
            limited += 1
            notes[node.name] = (
                f"waiting for a slot: {unavailable} of max {limit} unavailable, "
                f"{in_progress} of max {ctx.settings.max_parallel} in the rollout"
            )
            continue
        others = unavailable - 1 if already else unavailable
        steps[node.name] = Step(
            node=node,
            target=ctx.target,
            next_state=states.CORDON_REQUIRED,
            admission=Admission(pool_nodes=len(nodes), pool_unavailable=others),
            detail=node.detail.but(
                target=ctx.target,
                previous=node.driver,
                cordoned=node.detail.cordoned or not node.unschedulable,
                driver_pod=None,
                failure=None,
            ),
            reason=f"upgrading driver {node.driver} to {ctx.target}: "
            f"{others} other node(s) of {len(nodes)} unavailable, max {limit}",
        )
        notes[node.name] = steps[node.name].reason
        in_progress += 1
        if not already:
            unavailable += 1
    if limited:
        report.blocks.append(
            f"limit reached: {limited} node(s) wait for a slot "
            f"(max_unavailable {limit}, max_parallel {ctx.settings.max_parallel})"
        )


def _shown_state(node: NodeView, target: str) -> str:
    if node.state:
        return node.state
    if node.driver is None:
        return UNKNOWN_DRIVER
    return CURRENT if node.driver == target else OUTDATED


def _failure_reason(node: NodeView) -> str:
    failure = node.detail.failure or {}
    return str(failure.get("reason") or "failed (no reason recorded)")


# --- handlers, one per state -----------------------------------------------------------------


def _gpu_workloads(pods: list[PodView]) -> list[PodView]:
    return [p for p in pods if p.role is Role.WORKLOAD and p.gpu and p.active]


def _evict(pod: PodView, why: str, ctx: _Context) -> Evict:
    budget = pdb_blocking(ctx.pdbs, pod)
    return Evict(pod=pod, why=why, budget=f"{budget.namespace}/{budget.name}" if budget else None)


def _names(pods: list[PodView], limit: int = 5) -> str:
    shown = ", ".join(p.key for p in pods[:limit])
    return shown + (f" and {len(pods) - limit} more" if len(pods) > limit else "")


def _driver_restarted(node: NodeView, pods: list[PodView]) -> bool:
    """A node in `driver-restart-required` whose recorded driver pod is gone was restarted by an
    interrupted pass: it runs (or is loading) the new driver and must be validated."""
    if node.state != states.DRIVER_RESTART_REQUIRED or node.detail.driver_pod is None:
        return False
    return all(p.uid != node.detail.driver_pod for p in _driver_pods(pods))


def on_no_state(node: NodeView, pods: list[PodView], ctx: _Context) -> Step | None:
    """No label. Removed by an operator from a failed node: that is a clear. Removed from a node
    the rollout had cordoned: it goes back through validation (or the upgrade) before it takes
    work again. Otherwise marking (step 4 of `plan_pool`) decides."""
    if node.detail.failure:
        return clear_step(node, ctx.target, ctx.now, how="state label removed", actor=None)
    if node.detail.cordoned and node.unschedulable:
        at_target = node.driver == ctx.target
        return Step(
            node=node,
            target=ctx.target,
            next_state=states.VALIDATION_REQUIRED if at_target else states.CORDON_REQUIRED,
            detail=node.detail.but(
                attempt=node.detail.attempt + 1 if at_target else node.detail.attempt,
                target=ctx.target,
            ),
            reason="the state label was removed while the rollout had the node cordoned: "
            + ("validating it before it takes work" if at_target else "upgrading it again"),
        )
    return None


def on_upgrade_required(node: NodeView, pods: list[PodView], ctx: _Context) -> Step | None:
    if node.driver == ctx.target:
        return Step(
            node=node,
            target=ctx.target,
            next_state=states.UPGRADE_DONE,
            detail=node.detail,
            reason=f"already runs {ctx.target}: nothing to do",
        )
    return None  # admission (step 3 of `plan_pool`)


def on_cordon_required(node: NodeView, pods: list[PodView], ctx: _Context) -> Step:
    return Step(
        node=node,
        target=ctx.target,
        next_state=states.WAIT_FOR_JOBS_REQUIRED,
        actions=() if node.unschedulable else (Cordon(),),
        reason="cordoned: no new pod is scheduled here",
    )


def _evictable_now(pod: PodView, ctx: _Context) -> str | None:
    if pod.owner_kind in SERVICE_OWNERS:
        return f"replica of a {pod.owner_kind}, started again elsewhere"
    # A malformed or future annotation is no checkpoint: never evict on it (observe logs it).
    checkpoint = checkpoint_at(pod, ctx.now)
    if checkpoint is not None:
        age = ctx.now - checkpoint
        if age <= ctx.settings.checkpoint_max_age_seconds:
            return f"checkpointed {int(age)}s ago"
    return None


def on_wait_for_jobs(node: NodeView, pods: list[PodView], ctx: _Context) -> Step:
    timeout = ctx.settings.wait_for_jobs_timeout_seconds
    since = node.since if node.since is not None else ctx.now
    deadline = since + timeout
    consumers = _gpu_workloads(pods)
    if not consumers:
        return Step(
            node=node,
            target=ctx.target,
            next_state=states.DRAIN_REQUIRED,
            reason="no pod on the node uses the GPU",
        )
    if ctx.now >= deadline:
        return Step(
            node=node,
            target=ctx.target,
            next_state=states.DRAIN_REQUIRED,
            reason=f"waited {timeout}s: {len(consumers)} pod(s) still use the GPU and are "
            f"evicted: {_names(consumers)}",
        )
    jobs = [p for p in consumers if not p.deleting and _evictable_now(p, ctx) is None]
    evictions = tuple(
        _evict(p, why, ctx)
        for p in consumers
        if not p.deleting and (why := _evictable_now(p, ctx)) is not None
    )
    if not jobs:
        # Evicted here already, so that the drain usually finds the node empty; an eviction a
        # budget refuses keeps the node here until the next pass.
        return Step(
            node=node,
            target=ctx.target,
            next_state=states.DRAIN_REQUIRED,
            actions=evictions,
            reason="every pod left using the GPU is a service replica or checkpointed recently",
        )
    return Step(
        node=node,
        target=ctx.target,
        actions=evictions,
        stamp=node.since is None,
        reason=f"waiting until {format_time(deadline)} for {len(jobs)} job pod(s) to finish or "
        f"checkpoint: {_names(jobs)}",
    )


def _driver_pods(pods: list[PodView]) -> list[PodView]:
    return sorted(
        (p for p in pods if p.role is Role.DRIVER and p.active and not p.deleting),
        key=lambda p: p.name,
    )


def on_drain(node: NodeView, pods: list[PodView], ctx: _Context) -> Step:
    consumers = _gpu_workloads(pods)
    if not consumers:
        drivers = _driver_pods(pods)
        return Step(
            node=node,
            target=ctx.target,
            next_state=states.DRIVER_RESTART_REQUIRED,
            detail=node.detail.but(driver_pod=drivers[0].uid if drivers else None),
            reason="every pod that used the GPU is gone",
        )
    evictions = tuple(_evict(p, f"uses the GPU: {p.gpu}", ctx) for p in consumers if not p.deleting)
    if evictions:
        return Step(
            node=node,
            target=ctx.target,
            actions=evictions,
            reason=f"evicting {len(evictions)} pod(s) that use the GPU",
        )
    return Step(
        node=node,
        target=ctx.target,
        reason=f"waiting for {len(consumers)} evicted pod(s) to terminate: {_names(consumers)}",
    )


def on_driver_restart(node: NodeView, pods: list[PodView], ctx: _Context) -> Step:
    blockers = [
        p
        for p in pods
        if p.gpu and p.active and p.role in (Role.WORKLOAD, Role.DAEMONSET, Role.STATIC)
    ]
    if blockers:
        kinds = {p.role for p in blockers}
        hint = (
            ": DaemonSet and static pods are never evicted; stop them on this node, or run "
            "them in the GPU Operator's namespace so they restart with the driver"
            if kinds & {Role.DAEMONSET, Role.STATIC}
            else ""
        )
        return Step(
            node=node,
            target=ctx.target,
            actions=tuple(
                _evict(p, f"uses the GPU: {p.gpu}", ctx)
                for p in blockers
                if p.role is Role.WORKLOAD and not p.deleting
            ),
            reason=f"driver not restarted: {len(blockers)} pod(s) still use the GPU: "
            f"{_names(blockers)}{hint}",
        )
    drivers = _driver_pods(pods)
    recorded = node.detail.driver_pod
    if recorded is None:
        if not drivers:
            return Step(
                node=node,
                target=ctx.target,
                reason=f"no driver pod on the node (namespace {ctx.settings.driver_namespace}, "
                f"selector {ctx.settings.driver_selector})",
            )
        # Record which pod to restart before restarting it, so a run killed right after the
        # delete never restarts the replacement too.
        return Step(
            node=node,
            target=ctx.target,
            detail=node.detail.but(driver_pod=drivers[0].uid),
            reason=f"driver pod to restart: {drivers[0].key}",
        )
    following = node.detail.but(attempt=node.detail.attempt + 1)
    for pod in drivers:
        if pod.uid == recorded:
            return Step(
                node=node,
                target=ctx.target,
                next_state=states.VALIDATION_REQUIRED,
                actions=(RestartDriver(pod=pod),),
                detail=following,
                reason=f"restarting driver pod {pod.key} so that its DaemonSet rolls in "
                f"{ctx.target}",
            )
    return Step(
        node=node,
        target=ctx.target,
        next_state=states.VALIDATION_REQUIRED,
        detail=following,
        reason="the driver pod was already restarted",
    )


def on_validation(node: NodeView, pods: list[PodView], ctx: _Context) -> Step:
    detail = node.detail
    timeout = ctx.settings.validation_timeout_seconds
    since = node.since if node.since is not None else ctx.now
    timed_out = ctx.now >= since + timeout
    stale = tuple(
        DeleteValidator(pod=p)
        for p in pods
        if p.role is Role.VALIDATOR and p.attempt != detail.attempt and not p.deleting
    )

    def fail(reason: str, summary: dict[str, Any] | None = None) -> Step:
        return Step(
            node=node,
            target=ctx.target,
            next_state=states.UPGRADE_FAILED,
            failure=True,
            detail=detail.but(
                failure={
                    "at": int(ctx.now),
                    "reason": reason,
                    "attempt": detail.attempt,
                    **({"verdict": summary} if summary else {}),
                }
            ),
            reason=reason,
        )

    def wait(reason: str) -> Step:
        if timed_out:
            return fail(f"validation did not finish within {timeout}s: {reason}")
        return Step(
            node=node, target=ctx.target, actions=stale, stamp=node.since is None, reason=reason
        )

    restarted = [p for p in _driver_pods(pods) if p.uid != detail.driver_pod]
    if not any(p.phase == "Running" and p.ready for p in restarted):
        return wait("waiting for the new driver pod to be Running and Ready")
    if node.driver != ctx.target:
        return wait(
            f"the node reports driver {node.driver}; waiting for feature discovery to report "
            f"{ctx.target}"
        )
    if node.gpu_capacity <= 0:
        return wait("the node advertises no nvidia.com/gpu capacity yet")
    current = [p for p in pods if p.role is Role.VALIDATOR and p.attempt == detail.attempt]
    if not current:
        if timed_out:
            return wait("no validator ran")
        manifest = validator_pod(
            node, attempt=detail.attempt, target=ctx.target, settings=ctx.settings
        )
        return Step(
            node=node,
            target=ctx.target,
            actions=(*stale, CreateValidator(manifest=manifest)),
            reason=f"validating: started validator attempt {detail.attempt}",
        )
    validator = current[0]
    if validator.terminated is None:
        if validator.phase in ("Succeeded", "Failed"):
            outcome_reason = f"validator {validator.key} ended {validator.phase} without a result"
            return _retry(node, validator, stale, outcome_reason, fail, timed_out, ctx)
        return wait(f"validator {validator.key} is {validator.phase}")
    outcome = read_verdict(validator.terminated, target=ctx.target, gpus=node.gpu_capacity)
    if outcome.kind == HEALTHY:
        if node.gpu_allocatable < node.gpu_capacity:
            return wait(
                f"healthy, but nvidia.com/gpu allocatable is {node.gpu_allocatable} of "
                f"{node.gpu_capacity}: waiting for the device plugin"
            )
        return Step(
            node=node,
            target=ctx.target,
            next_state=states.UNCORDON_REQUIRED,
            actions=stale,
            detail=detail.but(verdict=outcome.summary),
            reason=f"validated: {outcome.reason}; nvidia.com/gpu allocatable "
            f"{node.gpu_allocatable} of {node.gpu_capacity}",
        )
    if outcome.kind == UNHEALTHY:
        return fail(f"validation failed: {outcome.reason}", outcome.summary)
    return _retry(node, validator, stale, outcome.reason, fail, timed_out, ctx)


def _retry(
    node: NodeView,
    validator: PodView,
    stale: tuple[Action, ...],
    reason: str,
    fail: Any,
    timed_out: bool,
    ctx: _Context,
) -> Step:
    if timed_out:
        return fail(
            f"validation did not finish within {ctx.settings.validation_timeout_seconds}s: {reason}"
        )
    attempt = node.detail.attempt + 1
    return Step(
        node=node,
        target=ctx.target,
        actions=(*stale, DeleteValidator(pod=validator)),
        detail=node.detail.but(attempt=attempt),
        reason=f"{reason}; trying again (attempt {attempt})",
    )


def on_uncordon(node: NodeView, pods: list[PodView], ctx: _Context) -> Step:
    actions: list[Action] = []
    if node.detail.cordoned and node.unschedulable:
        actions.append(Uncordon())
    actions += [DeleteValidator(pod=p) for p in pods if p.role is Role.VALIDATOR and not p.deleting]
    done = node.driver == ctx.target
    return Step(
        node=node,
        target=ctx.target,
        next_state=states.UPGRADE_DONE if done else states.UPGRADE_REQUIRED,
        actions=tuple(actions),
        detail=node.detail.but(cordoned=False, failure=None),
        reason=(
            f"back in service on driver {ctx.target}"
            if done
            else f"back in service on driver {node.driver}; the upgrade starts again later"
        ),
    )


def on_done(node: NodeView, pods: list[PodView], ctx: _Context) -> None:
    return None  # a new target is picked up by marking (step 4 of `plan_pool`)


HANDLERS: dict[str, Any] = {
    "": on_no_state,
    states.UPGRADE_REQUIRED: on_upgrade_required,
    states.CORDON_REQUIRED: on_cordon_required,
    states.WAIT_FOR_JOBS_REQUIRED: on_wait_for_jobs,
    states.DRAIN_REQUIRED: on_drain,
    states.DRIVER_RESTART_REQUIRED: on_driver_restart,
    states.VALIDATION_REQUIRED: on_validation,
    states.UNCORDON_REQUIRED: on_uncordon,
    states.UPGRADE_DONE: on_done,
}


def clear_step(
    node: NodeView, target: str, now: float, *, how: str, actor: str | None
) -> Step | None:
    """An operator clears a failed node: it goes back to validation (when it runs the target)
    or through the whole upgrade again (when it does not). It stays cordoned, and becomes done
    only after a validator passes again. None when there is nothing to clear."""
    failure = node.detail.failure
    if node.state != states.UPGRADE_FAILED and not (node.state is None and failure):
        return None
    at_target = node.driver == target
    cleared = {"at": int(now), "how": how, "failure": failure}
    if actor:
        cleared["by"] = actor
    detail = node.detail.but(
        failure=None,
        cleared=cleared,
        attempt=node.detail.attempt + 1 if at_target else node.detail.attempt,
        driver_pod=node.detail.driver_pod if at_target else None,
        target=target,
    )
    following = states.VALIDATION_REQUIRED if at_target else states.CORDON_REQUIRED
    return Step(
        node=node,
        target=target,
        next_state=following,
        detail=detail,
        reason=f"failure cleared ({how}): "
        + (
            "validating the node again"
            if at_target
            else f"driver {node.driver} is not {target}: upgrading the node again"
        ),
    )
