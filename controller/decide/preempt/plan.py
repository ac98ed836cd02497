"""The plan of a pass: waiting pods served highest priority first, then longest waiting, each
alone or with its gang, every choice counted on the ledger before the next."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.config import FleetView
from controller.decide.preempt.gangs import serve_gang
from controller.decide.preempt.ledger import Context, Ledger
from controller.decide.preempt.model import Preemption, PreemptPlan
from controller.decide.preempt.placement import node_options
from controller.decide.preempt.workload_gangs import victim_gangs
from controller.decide.workloads import gang_of, team_usage
from controller.observe.model import DisruptionBudget, Node, Pod

UNMODELLED_POD_AFFINITY = (
    "required pod affinity or anti-affinity: where it may run depends on other pods, "
    "which preemption does not model, so nothing is evicted for it"
)


def plan_preemption(
    pods: list[Pod],
    nodes: dict[str, Node],
    pdbs: list[DisruptionBudget],
    fleet: FleetView,
    priority_of: Any,
    now: float,
    *,
    pending_seconds: float,
    freeing: set[str] | frozenset[str] = frozenset(),
    min_members: Mapping[tuple[str, str], int] | None = None,
) -> PreemptPlan:
    """`priority_of(pod)`: the pod's priority (spec.priority, else its PriorityClass value).
    `freeing`: uids of pods this pass already removes (e.g. idle reclaims). `min_members`:
    each PodGroup's `minMember` by (namespace, name); a pending gang of several pods whose
    PodGroup is not in it waits (how many pods must be placed together is unknown)."""
    plan = PreemptPlan()
    waiting = [
        p
        for p in pods
        if not p.node_name and p.phase == "Pending" and not p.deleting and p.unschedulable_since
    ]
    if not waiting:
        return plan  # nothing waits: no need to account for the fleet
    min_members = min_members or {}
    gang_members = victim_gangs(pods)
    by_node: dict[str, list[Pod]] = {}
    for pod in pods:
        if pod.node_name and not pod.terminal:
            by_node.setdefault(pod.node_name, []).append(pod)
    free: dict[str, dict[str, int]] = {}
    for name, node in nodes.items():
        left = dict(node.allocatable)
        for pod in by_node.get(name, ()):
            if pod.deleting or pod.uid in freeing:
                continue
            for r, n in pod.demand.items():
                left[r] = left.get(r, 0) - n
        free[name] = left
    ledger = Ledger(
        free=free,
        usage=team_usage(pods, fleet, freeing=freeing),
        freeing=frozenset(freeing),
        gangs=gang_members,
    )
    context = Context(
        nodes=nodes, by_node=by_node, pdbs=pdbs, fleet=fleet, priority_of=priority_of, now=now
    )
    waiting.sort(key=lambda p: (-priority_of(p), p.unschedulable_since, p.namespace, p.name))
    handled: set[tuple[str, str]] = set()
    for pod in waiting:
        assert pod.unschedulable_since is not None
        key = gang_of(pod)
        if key is not None and key in handled:
            continue  # decided with its gang
        if pod.required_pod_affinity:
            # Where it may run depends on other pods' places, which the plan does not model:
            # it would evict for the pod every pass without it ever running. Its gang waits too.
            if key is not None:
                handled.add(key)
            plan.waiting.append((pod, UNMODELLED_POD_AFFINITY))
            continue
        if key is not None:
            # Volcano makes a PodGroup for every pod it places, so most are gangs of one.
            members = gang_members.get(key, [pod])
            min_member = min_members.get(key)
            if min_member is None and len(members) > 1:
                handled.add(key)
                plan.waiting.append(
                    (
                        pod,
                        f"pending gang of {len(members)} pods whose PodGroup {key[1]} was not "
                        "seen: how many of them must be placed together is unknown, so it waits",
                    )
                )
                continue
            running = [m for m in members if m.node_name and not m.deleting]
            if min_member is not None and min_member > 1 and min_member - len(running) > 0:
                handled.add(key)
                serve_gang(
                    plan, key, min_member, running, members, pending_seconds, context, ledger
                )
                continue
            # A pod alone, or one more than its gang needs running: room for it alone will do.
        pending = now - pod.unschedulable_since
        if pending < pending_seconds:
            plan.waiting.append(
                (pod, f"pending {pending:.0f}s, preempts after {pending_seconds:.0f}s")
            )
            continue
        preemption, why = _plan_one(pod, pending, context, ledger)
        if preemption is None:
            plan.waiting.append((pod, why))
            continue
        plan.preemptions.append(preemption)
        ledger.commit(preemption.options[0], pod, pdbs)
    return plan


def _plan_one(
    pod: Pod, pending: float, context: Context, ledger: Ledger
) -> tuple[Preemption | None, str]:
    if (pod.workload_type or "") not in context.fleet.workload_types:
        return None, f"workload type {pod.workload_type!r} is unknown, so no victim is allowed"
    options, free_node = node_options(pod, context, ledger)
    if free_node is not None:
        return None, f"fits on {free_node} once pods already terminating are gone"
    if not options:
        return None, "no node where preemptible lower-priority or over-quota work would make room"
    return (
        Preemption(
            preemptor=pod,
            priority=context.priority_of(pod),
            team=context.fleet.namespaces.get(pod.namespace),
            pending_seconds=pending,
            demand=dict(pod.demand),
            options=tuple(options),
        ),
        "planned",
    )
