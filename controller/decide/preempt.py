"""Priority preemption: for each workload kept waiting by lower-priority or over-quota work, the
node and the victims that free its accelerators with the least work lost.

Who may wait for preemption (a *preemptor*): a pod that requests accelerators, is unscheduled
with PodScheduled=False/Unschedulable for at least `preemption_pending_seconds`, and is not
being deleted. Preemptors are served highest priority first, then longest waiting.

Who may be a *victim* on a node (`_candidate`): a running pod of a team holding a needed
accelerator, not exempt, preemptible (label, else its type's default), past its type's
`min_runtime_seconds`, of strictly lower priority than the preemptor, and not already being
removed by this pass (`freeing`: its accelerators already count as free, so taking it again
would count them twice). Across teams the victim's team must keep at least its guaranteed quota
after losing it and every other victim of that team chosen before it (`Quota`, applied by
`select_victims`); a team's usage leaves out its pods already terminating or freed by this
pass. These are the checks of the `fleetplane/decisions/preempt` policy, which OPA
applies again to every victim before it is evicted: planning a victim the policy refuses (for
instance one of equal priority) would only leave the preemptor waiting. A preemptor whose
workload type is unknown waits, since the policy refuses every victim for it. A pod whose
PodDisruptionBudget allows no disruption right now is skipped (the Eviction API would refuse
it).

Victim order is one comparator, `victim_order`, with numbered tie-breakers:

1. least time since the last checkpoint first (`fleetplane.dev/last-checkpoint`, epoch
   seconds; without one, all the time since the pod started is at stake);
2. then lower priority first;
3. then fewer accelerators first (less work lost when the times are equal);
4. then namespace and name, so the order is total and a pass is reproducible.

Victims are taken in that order until the node fits the preemptor, then any victim not needed
after all is dropped again (latest first), so no more victims than needed are chosen. The node
needing the fewest victims wins (then the least work lost, then the name). Capacity freed by
pods already terminating counts as free, so a pass after a partial or interrupted one does not
evict more than needed. Everything here is decided on the snapshot; `act.preempt` asks OPA for
every victim and evicts through the Eviction API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from controller.config import FleetView
from controller.decide.workloads import (
    annotation_number,
    families,
    gang_of,
    gangs,
    preemptible,
    team_usage,
)
from controller.observe.model import DisruptionBudget, Node, Pod, family
from fleet import labels as keys


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    pod: Pod
    priority: int
    team: str | None
    frees: dict[str, int]
    running_seconds: float
    seconds_since_checkpoint: float
    mates: tuple[Pod, ...] = ()
    """The other pods of the victim's gang, evicted with it (they free nothing here)."""
    mates_devices: int = 0

    @property
    def devices(self) -> int:
        return sum(self.frees.values()) + self.mates_devices

    @property
    def work_lost(self) -> float:
        return self.seconds_since_checkpoint * self.devices


def victim_order(candidate: Candidate) -> tuple[Any, ...]:
    """The one victim comparator (see the module doc for the numbered tie-breakers)."""
    return (
        candidate.seconds_since_checkpoint,
        candidate.priority,
        candidate.devices,
        candidate.pod.namespace,
        candidate.pod.name,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeOption:
    node: str
    need: dict[str, int]
    candidates: tuple[Candidate, ...]
    victims: tuple[Candidate, ...]

    @property
    def work_lost(self) -> float:
        return sum(v.work_lost for v in self.victims)


@dataclass(frozen=True, slots=True, kw_only=True)
class Preemption:
    preemptor: Pod
    priority: int
    team: str | None
    pending_seconds: float
    demand: dict[str, int]
    options: tuple[NodeOption, ...]
    """Nodes where victims can make room, best first; the first is the plan."""


@dataclass(kw_only=True)
class PreemptPlan:
    preemptions: list[Preemption] = field(default_factory=list)
    waiting: list[tuple[Pod, str]] = field(default_factory=list)


# --- scheduling constraints ------------------------------------------------------------------


def tolerates(pod: Pod, taint: dict[str, Any]) -> bool:
    if taint.get("effect") not in ("NoSchedule", "NoExecute"):
        return True
    for toleration in pod.tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        if not toleration.get("key") and toleration.get("operator") == "Exists":
            return True
        if toleration.get("key") != taint.get("key"):
            continue
        if toleration.get("operator") == "Exists":
            return True
        if toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def _term_matches(term: dict[str, Any], labels: dict[str, str]) -> bool:
    for expression in term.get("matchExpressions") or ():
        key, operator = expression.get("key", ""), expression.get("operator")
        values = expression.get("values") or []
        value = labels.get(key)
        if operator == "In" and value not in values:
            return False
        if operator == "NotIn" and value in values:
            return False
        if operator == "Exists" and value is None:
            return False
        if operator == "DoesNotExist" and value is not None:
            return False
        if operator in ("Gt", "Lt"):
            try:
                number, bound = int(value or ""), int(values[0])
            except (ValueError, IndexError):
                return False
            if (operator == "Gt" and not number > bound) or (
                operator == "Lt" and not number < bound
            ):
                return False
    return not term.get("matchFields")


def fits(pod: Pod, node: Node) -> bool:
    """Whether the pod may run on the node, accelerators aside: Ready, schedulable, taints
    tolerated, node selector and required node affinity satisfied, the resources present.
    (CPU and memory are not modelled: accelerators are the scarce resource here.)"""
    if not node.ready or node.unschedulable:
        return False
    if any(node.allocatable.get(r, 0) < n for r, n in pod.demand.items()):
        return False
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    if pod.required_affinity and not any(
        _term_matches(term, node.labels) for term in pod.required_affinity
    ):
        return False
    return all(tolerates(pod, taint) for taint in node.taints)


# --- the plan --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Quota:
    """What the victims' teams hold (devices per family) and must keep. A victim of another
    team than the preemptor's is taken only while its team, after losing it *and every victim
    of that team chosen before it*, still holds at least its guaranteed quota: checking each
    victim against the team's usage alone would let two victims together take more than the
    team can lose."""

    usage: dict[str, dict[str, int]]
    guaranteed: dict[str, dict[str, int]]
    team: str | None
    """The preemptor's team: within one team priority alone orders the work."""

    @classmethod
    def of(cls, fleet: FleetView, usage: dict[str, dict[str, int]], team: str | None) -> Quota:
        return cls(
            usage=usage,
            guaranteed={name: dict(t.guaranteed) for name, t in fleet.teams.items()},
            team=team,
        )

    def held_after(self, team: str, taken: dict[str, dict[str, int]]) -> dict[str, int]:
        """The team's usage once the victims in `taken` (devices per team and family) go."""
        held = dict(self.usage.get(team, {}))
        for fam, n in taken.get(team, {}).items():
            held[fam] = held.get(fam, 0) - n
        return held

    def keeps(self, candidate: Candidate, taken: dict[str, dict[str, int]]) -> bool:
        """Whether the candidate's team keeps its guarantee after losing it too."""
        team = candidate.team
        if team is None or team == self.team:
            return True
        guaranteed = self.guaranteed.get(team, {})
        held = self.held_after(team, taken)
        return all(
            held.get(fam, 0) - n >= guaranteed.get(fam, 0)
            for fam, n in families(candidate.pod).items()
        )


def _count(ledger: dict[str, dict[str, int]], candidate: Candidate, sign: int) -> None:
    if candidate.team is None:
        return
    held = ledger.setdefault(candidate.team, {})
    for fam, n in families(candidate.pod).items():
        held[fam] = held.get(fam, 0) + sign * n


def take(taken: dict[str, dict[str, int]], candidate: Candidate) -> None:
    """Count the candidate's devices (per family) as taken from its team."""
    _count(taken, candidate, 1)


def release(usage: dict[str, dict[str, int]], candidate: Candidate) -> None:
    """Count the devices of an evicted candidate (per family) as no longer held by its team."""
    _count(usage, candidate, -1)


AnswerKey = tuple[str, tuple[tuple[str, int], ...]]
"""An OPA answer about a victim, kept by (its uid, the usage of its team it was asked with)."""


def asked_usages(
    victims: list[Candidate], quota: Quota
) -> list[tuple[Candidate, dict[str, int], AnswerKey]]:
    """Each victim of a selection with what OPA is asked about it: its team's usage once the
    victims before it are gone (asking each with the unreduced usage would let all of them
    pass together), and the key an answer to that question is kept under."""
    taken: dict[str, dict[str, int]] = {}
    out: list[tuple[Candidate, dict[str, int], AnswerKey]] = []
    for victim in victims:
        held = quota.held_after(victim.team or "", taken)
        take(taken, victim)
        out.append((victim, held, (victim.pod.uid, tuple(sorted(held.items())))))
    return out


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


def _pdb_blocks(pod: Pod, pdbs: list[DisruptionBudget]) -> DisruptionBudget | None:
    return next((b for b in pdbs if b.disruptions_allowed <= 0 and b.selects(pod)), None)


@dataclass(kw_only=True)
class _Ledger:
    """What earlier preemptions of this pass already took or reserved."""

    free: dict[str, dict[str, int]]
    usage: dict[str, dict[str, int]]
    freeing: frozenset[str] = frozenset()
    evicted: set[str] = field(default_factory=set)
    gangs: dict[tuple[str, str], list[Pod]] = field(default_factory=dict)


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
) -> PreemptPlan:
    """`priority_of(pod)`: the pod's priority (spec.priority, else its PriorityClass value).
    `freeing`: uids of pods this pass already removes (e.g. idle reclaims)."""
    plan = PreemptPlan()
    waiting = [
        p
        for p in pods
        if not p.node_name and p.phase == "Pending" and not p.deleting and p.unschedulable_since
    ]
    if not waiting:
        return plan  # nothing waits: no need to account for the fleet
    gang_members = gangs(pods)
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
    ledger = _Ledger(
        free=free, usage=team_usage(pods, fleet, freeing=freeing), freeing=frozenset(freeing)
    )
    waiting.sort(key=lambda p: (-priority_of(p), p.unschedulable_since, p.namespace, p.name))
    for pod in waiting:
        assert pod.unschedulable_since is not None
        pending = now - pod.unschedulable_since
        if pending < pending_seconds:
            plan.waiting.append(
                (pod, f"pending {pending:.0f}s, preempts after {pending_seconds:.0f}s")
            )
            continue
        gang = gang_members.get(gang_of(pod) or ("", ""), [])
        pending_mates = [m for m in gang if not m.node_name and m.uid != pod.uid]
        if pending_mates:
            plan.waiting.append(
                (
                    pod,
                    f"pending gang of {len(pending_mates) + 1} pods: room is made for a gang "
                    "only all at once, which needs a plan across nodes; it waits",
                )
            )
            continue
        ledger.gangs = gang_members
        preemption, why = _plan_one(
            pod, pending, nodes, by_node, pdbs, fleet, priority_of, now, ledger
        )
        if preemption is None:
            plan.waiting.append((pod, why))
            continue
        plan.preemptions.append(preemption)
        chosen = preemption.options[0]
        for victim in chosen.victims:
            for mate in victim.mates:
                ledger.evicted.add(mate.uid)
                if mate.node_name in ledger.free:
                    for r, n in mate.demand.items():
                        ledger.free[mate.node_name][r] = ledger.free[mate.node_name].get(r, 0) + n
            ledger.evicted.add(victim.pod.uid)
            for r, n in victim.frees.items():
                ledger.free[chosen.node][r] = ledger.free[chosen.node].get(r, 0) + n
            if victim.team:
                held = ledger.usage.setdefault(victim.team, {})
                for fam, n in families(victim.pod).items():
                    held[fam] = held.get(fam, 0) - n
        for r, n in pod.demand.items():
            ledger.free[chosen.node][r] = ledger.free[chosen.node].get(r, 0) - n
    return plan


def _plan_one(
    pod: Pod,
    pending: float,
    nodes: dict[str, Node],
    by_node: dict[str, list[Pod]],
    pdbs: list[DisruptionBudget],
    fleet: FleetView,
    priority_of: Any,
    now: float,
    ledger: _Ledger,
) -> tuple[Preemption | None, str]:
    priority = priority_of(pod)
    team = fleet.namespaces.get(pod.namespace)
    if (pod.workload_type or "") not in fleet.workload_types:
        return None, f"workload type {pod.workload_type!r} is unknown, so no victim is allowed"
    options: list[NodeOption] = []
    for name in sorted(nodes):
        node = nodes[name]
        if not fits(pod, node):
            continue
        need = {r: n - ledger.free[name].get(r, 0) for r, n in pod.demand.items()}
        if all(n <= 0 for n in need.values()):
            return None, f"fits on {name} once pods already terminating are gone"
        candidates = sorted(
            (
                c
                for victim in by_node.get(name, ())
                if (
                    c := _candidate(
                        victim,
                        pod,
                        priority,
                        team,
                        fleet,
                        pdbs,
                        priority_of,
                        now,
                        ledger,
                    )
                )
                is not None
            ),
            key=victim_order,
        )
        victims = select_victims(candidates, need, Quota.of(fleet, ledger.usage, team))
        if victims is None:
            continue
        options.append(
            NodeOption(node=name, need=need, candidates=tuple(candidates), victims=tuple(victims))
        )
    if not options:
        return None, "no node where preemptible lower-priority or over-quota work would make room"
    options.sort(key=lambda o: (len(o.victims), o.work_lost, o.node))
    return (
        Preemption(
            preemptor=pod,
            priority=priority,
            team=team,
            pending_seconds=pending,
            demand=dict(pod.demand),
            options=tuple(options),
        ),
        "planned",
    )


def _candidate(
    victim: Pod,
    preemptor: Pod,
    priority: int,
    team: str | None,
    fleet: FleetView,
    pdbs: list[DisruptionBudget],
    priority_of: Any,
    now: float,
    ledger: _Ledger,
    *,
    alone: bool = False,
) -> Candidate | None:
    """The victim as a candidate, or None when it may not be one; a gang member only with all
    its mates allowed too (`alone`: judge the pod by itself, for checking a mate)."""
    if victim.deleting or victim.terminal or victim.exempt:
        return None
    if victim.uid in ledger.evicted or victim.uid in ledger.freeing:
        return None
    if victim.phase != "Running":
        return None
    frees = {r: n for r, n in victim.demand.items() if r in preemptor.demand}
    if (not frees and not alone) or not preemptible(victim, fleet):
        return None
    wt = fleet.workload_types.get(victim.workload_type or "")
    if wt is None:
        return None
    started = victim.started if victim.started is not None else victim.created
    running = max(0.0, now - started)
    if running < wt.min_runtime_seconds:
        return None
    victim_priority = priority_of(victim)
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
    if _pdb_blocks(victim, pdbs) is not None:
        return None
    checkpoint = annotation_number(victim, keys.LAST_CHECKPOINT)
    since = now - checkpoint if checkpoint is not None and checkpoint <= now else running
    mates: tuple[Pod, ...] = ()
    gang = None if alone else ledger.gangs.get(gang_of(victim) or ("", ""))
    if gang is not None:
        mates = tuple(m for m in gang if m.uid != victim.uid)
        for mate in mates:
            # A gang is taken whole or not at all: every mate must be a victim in its own right.
            if not mate.node_name or mate.uid in ledger.evicted:
                return None
            if (
                _candidate(
                    mate,
                    preemptor,
                    priority,
                    team,
                    fleet,
                    pdbs,
                    priority_of,
                    now,
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


def opa_input(
    preemption: Preemption, victim: Candidate, fleet: FleetView, usage: dict[str, int], now: float
) -> dict[str, Any]:
    """The preempt decision input (docs/contracts.md)."""
    return {
        "preemptor": {
            "pod": preemption.preemptor.manifest(),
            "workload_type": preemption.preemptor.workload_type,
            "priority": preemption.priority,
            "pending_seconds": int(preemption.pending_seconds),
        },
        "victim": {
            "pod": victim.pod.manifest(),
            "workload_type": victim.pod.workload_type,
            "priority": victim.priority,
            "running_seconds": int(victim.running_seconds),
            "seconds_since_checkpoint": int(victim.seconds_since_checkpoint),
            "team_usage": {family(r): n for r, n in usage.items()},
        },
        "now": int(now),
    }
