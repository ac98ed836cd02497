"""Who may be a victim on a node, with its gang, and the fewest victims that make room, in
comparator order and within every team's guarantee."""

from __future__ import annotations

from collections.abc import Mapping

from controller.config import FleetView
from controller.decide.preempt.ledger import Context, Ledger
from controller.decide.preempt.model import Candidate
from controller.decide.preempt.ordering import victim_order
from controller.decide.preempt.quota import Quota, take
from controller.decide.preempt.workload_gangs import workload_key
from controller.decide.workloads import annotation_number, families, preemptible
from controller.observe.model import DisruptionBudget, Pod
from fleet import labels as keys


def select_victims(
    candidates: tuple[Candidate, ...] | list[Candidate],
    need: dict[str, int],
    quota: Quota | None = None,
) -> list[Candidate] | None:
    """Victims in comparator order until `need` is met, then the unneeded ones dropped again;
    None when all of them together are not enough. With a `quota`, a candidate whose team
    would fall below its guarantee after losing it and the victims of its team chosen before
    it is passed over."""
    need = {r: n for r, n in need.items() if n > 0}
    if not need:
        return []
    chosen: list[Candidate] = []
    freed: dict[str, int] = {}
    taken: dict[str, dict[str, int]] = {}

    def enough(freed: dict[str, int]) -> bool:
        return all(freed.get(r, 0) >= n for r, n in need.items())

    for candidate in candidates:
        if not any(candidate.frees.get(r, 0) for r in need):
            continue
        if quota is not None and not quota.keeps(candidate, taken):
            continue
        take(taken, candidate)
        chosen.append(candidate)
        for r, n in candidate.frees.items():
            freed[r] = freed.get(r, 0) + n
        if enough(freed):
            break
    else:
        return None
    for candidate in reversed(list(chosen)):
        without = {r: freed.get(r, 0) - candidate.frees.get(r, 0) for r in freed}
        if enough(without):
            chosen.remove(candidate)
            freed = without
    return sorted(chosen, key=victim_order)


def run_so_far(victim: Pod, fleet: FleetView, now: float) -> tuple[float, float] | None:
    """(seconds the victim has run, seconds of work since its last checkpoint: all of its run
    without one) when it is past its workload type's minimum runtime; None when it is not, or
    its type is unknown (unknown is never a victim)."""
    wt = fleet.workload_types.get(victim.workload_type or "")
    if wt is None:
        return None
    started = victim.started if victim.started is not None else victim.created
    running = max(0.0, now - started)
    if running < wt.min_runtime_seconds:
        return None
    checkpoint = annotation_number(victim, keys.LAST_CHECKPOINT)
    since = now - checkpoint if checkpoint is not None and checkpoint <= now else running
    return running, since


def pdb_blocks(
    pod: Pod, pdbs: list[DisruptionBudget], used: Mapping[tuple[str, str], int] | None = None
) -> DisruptionBudget | None:
    """The budget that allows no further disruption of the pod: none left now, or none left
    once the victims this pass already chose under the same budget are gone (`used`)."""
    used = used or {}
    return next(
        (
            b
            for b in pdbs
            if b.disruptions_allowed - used.get((b.namespace, b.name), 0) <= 0 and b.selects(pod)
        ),
        None,
    )


def as_candidate(
    victim: Pod,
    preemptor: Pod,
    priority: int,
    team: str | None,
    context: Context,
    ledger: Ledger,
    *,
    alone: bool = False,
) -> Candidate | None:
    """The victim as a candidate, or None when it may not be one; a gang member only with all
    its mates allowed too (`alone`: judge the pod by itself, for checking a mate)."""
    fleet, now = context.fleet, context.now
    if victim.deleting or victim.terminal or victim.exempt:
        return None
    if victim.uid in ledger.evicted or victim.uid in ledger.freeing or victim.uid in ledger.refused:
        return None
    if victim.phase != "Running":
        return None
    frees = {r: n for r, n in victim.demand.items() if r in preemptor.demand}
    if (not frees and not alone) or not preemptible(victim, fleet):
        return None
    run = run_so_far(victim, fleet, now)
    if run is None:
        return None
    running, since = run
    victim_priority = context.priority_of(victim)
    if victim_priority >= priority:
        return None
    victim_team = fleet.namespaces.get(victim.namespace)
    if victim_team is None:
        return None
    if victim_team != team:
        guaranteed = fleet.teams[victim_team].guaranteed
        held = ledger.usage.get(victim_team, {})
        if any(
            held.get(fam, 0) - n < guaranteed.get(fam, 0) for fam, n in families(victim).items()
        ):
            return None
    if pdb_blocks(victim, context.pdbs, ledger.disruptions) is not None:
        return None
    mates: tuple[Pod, ...] = ()
    gang = None if alone else ledger.gangs.get(workload_key(victim) or ("", ""))
    if gang is not None:
        mates = tuple(m for m in gang if m.uid != victim.uid)
        for mate in mates:
            # A gang is taken whole or not at all: every mate must be a victim in its own right.
            if not mate.node_name or mate.uid in ledger.evicted:
                return None
            if (
                as_candidate(
                    mate,
                    preemptor,
                    priority,
                    team,
                    context,
                    ledger,
                    alone=True,
                )
                is None
            ):
                return None
    return Candidate(
        pod=victim,
        priority=victim_priority,
        team=victim_team,
        frees=frees,
        running_seconds=running,
        seconds_since_checkpoint=max(0.0, min(since, running)),
        mates=mates,
        mates_devices=sum(sum(m.demand.values()) for m in mates),
    )
