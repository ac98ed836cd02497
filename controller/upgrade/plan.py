"""Deciding one upgrade pass: pure functions over the snapshot, no I/O.

`plan_pass` groups the snapshot's nodes by pool and runs one handler per state over them (the
GPU Operator's upgrade library, ApplyState). A handler returns a `Step`: the idempotent side
effects to carry out, then the state to move to (or none: the node waits, and the step says
what for). Each node moves at most one state per pass. Per pool, in this order:

1. every node's own handler (the nodes in the rollout advance, wait or fail);
2. the halt: while a node of the pool is failed, or fails in this pass, nothing new starts, no
   driver is restarted, and nodes still on the old driver go back into service;
3. admissions: inside a maintenance window, nodes in `upgrade-required` leave service in a fixed
   order while `nodeflow.slots.slots` allows (each still needs OPA's allow, asked when acting);
   A node that runs a pod of a gang (Volcano PodGroup) whose other pods run on other nodes is
   admitted only together with all of those nodes (`_drain_group`), when the slots allow all
   of them at once; otherwise it waits, and its note says for what. Part of a gang is never
   drained: Volcano runs a gang whole or not at all.
4. marking: nodes whose driver differs from the target become `upgrade-required` (inside a
   window, and not while halted).

Admission order, one comparator: (1) nodes already unschedulable for another reason first (they
take no unavailability slot), (2) then by name, numbers compared as numbers (`pool-2` before
`pool-10`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from controller.nodeflow import claims, lock
from controller.nodeflow.slots import natural_key, slots
from controller.observe.model import format_time
from controller.upgrade import states
from controller.upgrade.handlers import HANDLERS, Context, driver_restarted
from controller.upgrade.limits import in_any_window, next_opening
from controller.upgrade.observe import (
    NodeView,
    UpgradeSnapshot,
)
from controller.upgrade.settings import PoolTarget, UpgradeSettings
from controller.upgrade.states import Detail
from controller.upgrade.steps import Admission, Evict, Step

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


def admission_order(node: NodeView) -> tuple[Any, ...]:
    return (not node.unschedulable, natural_key(node.name))


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
    ctx = Context(settings=settings, target=pool.driver_version, now=now, pdbs=snapshot.pdbs)
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
            if node.state in states.BEFORE_DRIVER_RESTART and not driver_restarted(
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
            _admit(candidates, nodes, steps, notes, report, ctx, limit, snapshot)
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
    ctx: Context,
    limit: int,
    snapshot: UpgradeSnapshot,
) -> None:
    unavailable, in_progress = report.unavailable, report.in_progress
    limited = 0
    by_name = {n.name: n for n in nodes}
    eligible: dict[str, NodeView] = {}
    for node in candidates:
        if not node.ready:
            notes[node.name] = "NotReady: not started until it is Ready again"
            continue
        held = claims.HEALTH.held(node.labels)
        if held:
            # The two machines never act on one node at once (controller/remediation).
            notes[node.name] = f"held by GPU health remediation ({held}): not started"
            continue
        busy = lock.why_not(node.manifest(), lock.UPGRADE, ctx.now)
        if busy:
            # One disruptive actor per node (controller/nodeflow/lock.py).
            notes[node.name] = f"not started: {busy}"
            continue
        eligible[node.name] = node
    decided: set[str] = set()
    for node in candidates:
        if node.name not in eligible or node.name in decided:
            continue
        group, why = _drain_group(node, snapshot, by_name, eligible, ctx.target)
        if group is None:
            decided.add(node.name)
            notes[node.name] = why
            report.blocks.append(f"node {node.name}: {why}")
            continue
        decided |= {m.name for m in group}
        # Nodes already unschedulable for another reason take no unavailability slot.
        needs_parallel = len(group)
        needs_unavailable = sum(not m.unschedulable for m in group)
        if needs_unavailable:
            # The count function: slots left once the group's already-unschedulable nodes
            # took their parallel slots must cover the rest.
            room = slots(
                max_parallel=ctx.settings.max_parallel,
                in_progress=in_progress + needs_parallel - needs_unavailable,
                max_unavailable=limit,
                unavailable=unavailable,
            )
            fits = room >= needs_unavailable
        else:
            fits = ctx.settings.max_parallel - in_progress >= needs_parallel
        if not fits:
            limited += len(group)
            together = (
                f" ({len(group)} nodes of one gang, drained together)" if len(group) > 1 else ""
            )
            for member in group:
                notes[member.name] = (
                    f"waiting for a slot{together}: {unavailable} of max {limit} unavailable, "
                    f"{in_progress} of max {ctx.settings.max_parallel} in the rollout"
                )
            continue
        names = tuple(m.name for m in group) if len(group) > 1 else ()
        for member in group:
            already = member.unschedulable
            others = unavailable - 1 if already else unavailable
            steps[member.name] = Step(
                node=member,
                target=ctx.target,
                next_state=states.CORDON_REQUIRED,
                admission=Admission(pool_nodes=len(nodes), pool_unavailable=others, together=names),
                detail=member.detail.but(
                    target=ctx.target,
                    previous=member.driver,
                    cordoned=member.detail.cordoned or not member.unschedulable,
                    driver_pod=None,
                    failure=None,
                ),
                reason=f"upgrading driver {member.driver} to {ctx.target}: "
                f"{others} other node(s) of {len(nodes)} unavailable, max {limit}"
                + (
                    f"; drained with {', '.join(n for n in names if n != member.name)}, "
                    "which run pods of the same gang"
                    if names
                    else ""
                ),
            )
            notes[member.name] = steps[member.name].reason
            in_progress += 1
            if not already:
                unavailable += 1
    if limited:
        report.blocks.append(
            f"limit reached: {limited} node(s) wait for a slot "
            f"(max_unavailable {limit}, max_parallel {ctx.settings.max_parallel})"
        )


def _drain_group(
    node: NodeView,
    snapshot: UpgradeSnapshot,
    by_name: dict[str, NodeView],
    eligible: dict[str, NodeView],
    target: str,
) -> tuple[list[NodeView] | None, str]:
    """The nodes to take into the drain with `node` so that no gang (Volcano PodGroup) loses
    only some of its pods: every node a gang with a pod on one of them runs on, transitively.
    A gang node already in the rollout is being drained anyway. None, and why, when a gang
    also runs on a node that cannot be admitted now: the node waits until the gang is gone."""
    group = {node.name: node}
    frontier = [node.name]
    while frontier:
        here = frontier.pop()
        for (namespace, gang), on in sorted(snapshot.gangs_on(here).items()):
            for other in sorted(on - set(group)):
                found = by_name.get(other)
                if found is not None and found.state in states.IN_PROGRESS:
                    continue
                if other not in eligible:
                    return None, (
                        f"waiting: it runs a pod of gang {namespace}/{gang}, which also runs on "
                        f"node {other} ({_why_not_admitted(found, target)}); draining part of "
                        "a gang would stop all of it, so this node waits for the gang to end "
                        "or for its nodes to be drained together"
                    )
                group[other] = eligible[other]
                frontier.append(other)
    return sorted(group.values(), key=admission_order), ""


def _why_not_admitted(node: NodeView | None, target: str) -> str:
    if node is None:
        return "not in this pool's rollout"
    if node.state == states.UPGRADE_FAILED:
        return "failed"
    if node.state != states.UPGRADE_REQUIRED:
        if node.driver == target:
            return f"already on driver {target}"
        return f"in state {node.state or 'none'}, not yet waiting for admission"
    if not node.ready:
        return "NotReady"
    if claims.HEALTH.held(node.labels):
        return "held by GPU health remediation"
    return "not admissible now"


def _shown_state(node: NodeView, target: str) -> str:
    if node.state:
        return node.state
    if node.driver is None:
        return UNKNOWN_DRIVER
    return CURRENT if node.driver == target else OUTDATED


def _failure_reason(node: NodeView) -> str:
    failure = node.detail.failure or {}
    return str(failure.get("reason") or "failed (no reason recorded)")
