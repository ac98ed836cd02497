"""A pending gang is served only if room for all its still-unplaced pods is made at once, on one
trial ledger; otherwise nobody is evicted for it and it is reported with why."""

from __future__ import annotations

from typing import Any

from controller.decide.preempt.ledger import Context, Ledger
from controller.decide.preempt.model import (
    GangPlacement,
    GangPlan,
    NodeOption,
    Preemption,
    PreemptPlan,
    UnservedGang,
)
from controller.decide.preempt.placement import node_options
from controller.observe.model import Pod


def serve_gang(
    plan: PreemptPlan,
    key: tuple[str, str],
    min_member: int,
    running: list[Pod],
    members: list[Pod],
    pending_seconds: float,
    context: Context,
    ledger: Ledger,
) -> None:
    """Plan room for the gang's still-unplaced pods at once, or record why it waits."""
    still = min_member - len(running)
    pending = [
        m
        for m in members
        if not m.node_name and not m.deleting and m.phase == "Pending" and m.unschedulable_since
    ]
    head = min(pending, key=lambda m: (m.unschedulable_since or 0.0, m.name))
    if len(pending) < still:
        plan.waiting.append(
            (
                head,
                f"gang {key[1]} needs {still} more pod(s) to reach minMember {min_member} "
                f"({len(running)} running) but only {len(pending)} wait unschedulable: it waits "
                "for the rest to be created or judged by the scheduler",
            )
        )
        return
    waited = context.now - max(m.unschedulable_since or 0.0 for m in pending)
    if waited < pending_seconds:
        plan.waiting.append(
            (
                head,
                f"gang {key[1]} pending {waited:.0f}s (its latest pod), preempts after "
                f"{pending_seconds:.0f}s",
            )
        )
        return
    unknown = sorted({m.workload_type or "" for m in pending} - set(context.fleet.workload_types))
    if unknown:
        plan.waiting.append(
            (head, f"gang {key[1]}: workload type(s) {unknown} unknown, so no victim is allowed")
        )
        return
    # Hardest pods first: the largest demand is the hardest to find room for.
    order = sorted(pending, key=lambda m: (-sum(m.demand.values()), m.name))

    before = ledger.copy()  # what the replan starts from: the ledger gets this plan below

    def planned(refused: frozenset[str]) -> tuple[GangPlan | None, str, Ledger]:
        start = before.copy()
        start.refused = start.refused | refused
        return _plan_gang(key, min_member, len(running), still, order, context, start)

    gang, why, trial = planned(frozenset())
    if gang is None:
        plan.waiting.append((head, why))
        plan.unserved_gangs.append(
            UnservedGang(namespace=key[0], name=key[1], pods=tuple(pending), reason=why)
        )
        return
    if not any(p.option.victims for p in gang.placements):
        plan.waiting.append(
            (
                head,
                f"gang {key[1]}: room for all its pods exists once pods already terminating "
                "are gone",
            )
        )
        return
    first = gang.placements[0]
    plan.preemptions.append(
        Preemption(
            preemptor=first.pod,
            priority=first.priority,
            team=context.fleet.namespaces.get(key[0]),
            pending_seconds=waited,
            demand=_total(p.pod.demand for p in gang.placements),
            options=(),
            gang=gang,
            replan=lambda refused: planned(refused)[:2],
        )
    )
    ledger.free, ledger.usage = trial.free, trial.usage
    ledger.evicted, ledger.disruptions = trial.evicted, trial.disruptions


def _total(demands: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for demand in demands:
        for r, n in demand.items():
            out[r] = out.get(r, 0) + n
    return out


GANG_FIRST_CHOICES = 8
"""How many of the best nodes for a gang's first pod are each tried as the start of a whole
plan (the rest placed greedily after it): the best node for one pod may be the worst start for
the gang, e.g. a lone victim where a victim gang would have freed two nodes at once."""


def _plan_gang(
    key: tuple[str, str],
    min_member: int,
    running: int,
    still: int,
    order: list[Pod],
    context: Context,
    ledger: Ledger,
) -> tuple[GangPlan | None, str, Ledger]:
    """Room for `still` of the pending pods (in `order`), each on its node given the placements
    before it, on a copy of the ledger. The first pod that can be placed tries each of its
    `GANG_FIRST_CHOICES` best nodes, the others take their best node in turn; of the complete
    plans the one evicting the fewest pods (victims and their mates) wins, then the least work
    lost, then the node names. None when fewer than `still` pods can be placed."""
    first: tuple[int, list[NodeOption]] | None = None
    for i, pod in enumerate(order):
        options, _ = node_options(pod, context, ledger)
        if options:
            first = (i, options)
            break
    best: tuple[tuple[Any, ...], list[GangPlacement], Ledger] | None = None
    most: tuple[int, list[str]] = (0, [p.name for p in order])
    if first is not None:
        index, options = first
        for option in options[:GANG_FIRST_CHOICES]:
            trial = ledger.copy()
            placements, failures = _place_in_turn(order[index:], still, option, context, trial)
            failures = [p.name for p in order[:index]] + failures
            if len(placements) < still:
                if len(placements) > most[0]:
                    most = (len(placements), failures)
                continue
            victims = [v for p in placements for v in p.option.victims]
            score = (
                sum(1 + len(v.mates) for v in victims),
                sum(v.work_lost for v in victims),
                [p.option.node for p in placements],
            )
            if best is None or score < best[0]:
                best = (score, placements, trial)
    if best is None:
        placed, failures = most
        return (
            None,
            f"gang {key[1]} (minMember {min_member}, {running} running) needs room for {still} "
            f"more pod(s) at once, but preemptible lower-priority or over-quota work makes room "
            f"for only {placed} (no room for {', '.join(failures)}): nobody is evicted",
            ledger,
        )
    _, placements, trial = best
    return (
        GangPlan(
            namespace=key[0],
            name=key[1],
            min_member=min_member,
            running=running,
            placements=tuple(placements),
        ),
        "planned",
        trial,
    )


def _place_in_turn(
    pods: list[Pod], still: int, first: NodeOption, context: Context, trial: Ledger
) -> tuple[list[GangPlacement], list[str]]:
    """The first pod on `first`, then each next pod on its best node given those before it
    (committed to `trial`), until `still` are placed: the placements and the pods left out."""
    placements: list[GangPlacement] = []
    failures: list[str] = []
    for pod in pods:
        if len(placements) == still:
            break
        if placements:
            options, _ = node_options(pod, context, trial)
            if not options:
                failures.append(pod.name)
                continue
            option = options[0]
        else:
            option = first
        placements.append(
            GangPlacement(
                pod=pod,
                priority=context.priority_of(pod),
                pending_seconds=context.now - (pod.unschedulable_since or context.now),
                option=option,
            )
        )
        trial.commit(option, pod, context.pdbs)
    return placements, failures
