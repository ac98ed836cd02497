"""Deciding one health pass: pure functions over the snapshot and the classified signals.

Like the driver upgrade (and the GPU Operator's upgrade library it copies): nodes grouped by
pool, one handler per state, each returning a `Step` (idempotent actions, then the next state),
each node moving at most one state per pass. Per pool, in this order:

1. every node's own handler (nodes already out of service advance, wait or escalate);
2. admissions: nodes with a fault that asks for action leave service, most severe remedy first
   (replace, reboot, reset, then hot), then by name, while the pool's throttle allows:
   `nodeflow.slots.slots(max_parallel=limit, in_progress=out, max_unavailable=limit, unavailable=out)`,
   where `limit` is `health.max_unavailable` of the pool's nodes and `out` counts the pool's
   nodes in any health state, and those admitted earlier in the pass. An alert storm across a
   pool therefore stops at the limit; the rest wait, reported.

The driver upgrade and this machine never act on the same node: a node the upgrade holds
(`controller.nodeflow.claims.UPGRADE`: any state from `cordon-required` to
`uncordon-required`, or `upgrade-failed`) is not admitted here (its fault is reported and
waits), and the upgrade does not admit or mark a node with a health state (`claims.HEALTH`).
The handlers are in `handlers` and `recovery`, the steps in `steps`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from controller.nodeflow import claims, lock
from controller.nodeflow.pods import PodView
from controller.nodeflow.slots import natural_key, slots
from controller.remediation import states
from controller.remediation.classify import CONTAINED_ECC, SEVERITY, Fault, NodeVerdict
from controller.remediation.handlers import HANDLERS, admit
from controller.remediation.observe import HealthNode, HealthSnapshot
from controller.remediation.settings import HealthSettings
from controller.remediation.steps import RETURN as RETURN
from controller.remediation.steps import Context, Step


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
    contained: list[tuple[str, Fault, list[PodView]]] = field(default_factory=list)
    """Contained ECC errors (Xid 94): the pods on the GPU, not the node, are told."""


# --- planning --------------------------------------------------------------------------------


def plan_pass(
    snapshot: HealthSnapshot, verdicts: dict[str, NodeVerdict], settings: HealthSettings, now: float
) -> Plan:
    plan = Plan(now=now, verdicts=verdicts)
    ctx = Context(settings=settings, snapshot=snapshot, now=now)
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
    pool: str, nodes: list[HealthNode], verdicts: dict[str, NodeVerdict], ctx: Context
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
            held = claims.UPGRADE.held(node.view.labels)
            busy = lock.why_not(node.view.manifest(), lock.REMEDIATION, ctx.now)
            if held:
                report.waiting[node.name] = (
                    f"{step.reason}: waiting, the driver upgrade holds the node ({held})"
                )
            elif busy:
                report.waiting[node.name] = f"{step.reason}: waiting, {busy}"
            else:
                candidates.append((node, step))
            continue
        if step is not None:
            report.notes[node.name] = step.reason
            if step.acts:
                steps.append(step)
    candidates.sort(key=lambda c: (-_severity(c[1]), natural_key(c[0].name)))
    for node, fault in candidates:
        room = slots(max_parallel=limit, in_progress=out, max_unavailable=limit, unavailable=out)
        if room <= 0:
            report.waiting[node.name] = (
                f"{fault.reason}: waiting, {out} of {limit} node(s) of the pool already out of service for health"
            )
            continue
        steps.append(admit(node, fault, len(nodes), out, ctx))
        report.notes[node.name] = steps[-1].reason
        out += 1
    return steps, report


def _severity(fault: Fault) -> int:
    return SEVERITY.get(fault.remedy or "", 0)


def contained_faults(
    snapshot: HealthSnapshot, verdicts: dict[str, NodeVerdict]
) -> list[tuple[str, Fault]]:
    return [(name, f) for name, v in verdicts.items() for f in v.faults if f.kind == CONTAINED_ECC]
