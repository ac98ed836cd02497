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

A pending *gang* (a Volcano PodGroup with `minMember` above 1 and fewer pods running than that)
is served only if room for all its still-unplaced pods (`minMember` minus those running) is
made at once: its unschedulable pods are placed one after another, the largest first, each on
the node needing the fewest victims given the placements before it (node selector, affinity,
taints and accelerator resource as for one pod; a victim gang's mates free their own nodes,
which a later pod may use), all on one trial ledger. When fewer than that many pods can be
placed, the trial is dropped: nobody is evicted, and the gang is reported (`unserved_gangs`)
with why. A gang whose PodGroup is not in the snapshot waits (its `minMember` is unknown), as
does one with fewer unschedulable pods than it still needs. Victims are whole gangs as for any
preemptor, and a victim gang's devices count against its team's guarantee together. The plan
carries a `replan` on the same snapshot, for act to call without victims the policy refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
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
    def families(self) -> dict[str, int]:
        """Devices per family its team loses with it: its own and its gang mates'."""
        out: dict[str, int] = {}
        for pod in (self.pod, *self.mates):
            for fam, n in families(pod).items():
                out[fam] = out.get(fam, 0) + n
        return out

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
class GangPlacement:
    """One pending pod of a gang, the node it is to run on and the victims that make room for
    it there (none when the node already has room, or once earlier placements' victims go)."""

    pod: Pod
    priority: int
    pending_seconds: float
    option: NodeOption


@dataclass(frozen=True, slots=True, kw_only=True)
class GangPlan:
    """Room for every still-unplaced pod of a pending gang, made at once: `placements` holds
    `min_member - running` pods, each on its node, with the whole victim gangs to evict."""

    namespace: str
    name: str
    min_member: int
    running: int
    placements: tuple[GangPlacement, ...]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def victims(self) -> list[tuple[GangPlacement, Candidate]]:
        """Every victim with the placement it makes room for, in placement order."""
        return [(p, v) for p in self.placements for v in p.option.victims]


Replan = Callable[[frozenset[str]], tuple["GangPlan | None", str]]
"""Plan the gang again on the same snapshot without the given victim uids (the policy refused
them): the new plan, or None and why no plan is left."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Preemption:
    preemptor: Pod
    priority: int
    team: str | None
    pending_seconds: float
    demand: dict[str, int]
    options: tuple[NodeOption, ...]
    """Nodes where victims can make room, best first; the first is the plan. Empty for a gang:
    its plan is `gang`."""
    gang: GangPlan | None = None
    replan: Replan | None = None

    def for_placement(self, placement: GangPlacement) -> Preemption:
        """The preemption as seen by one pod of the gang: the preemptor the policy is asked
        about and the Events name, for the victims chosen for that pod."""
        return Preemption(
            preemptor=placement.pod,
            priority=placement.priority,
            team=self.team,
            pending_seconds=placement.pending_seconds,
            demand=dict(placement.pod.demand),
            options=(placement.option,),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class UnservedGang:
    """A pending gang the planner tried to serve and could not make room for as a whole."""

    namespace: str
    name: str
    pods: tuple[Pod, ...]
    reason: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(kw_only=True)
class PreemptPlan:
    preemptions: list[Preemption] = field(default_factory=list)
    waiting: list[tuple[Pod, str]] = field(default_factory=list)
    unserved_gangs: list[UnservedGang] = field(default_factory=list)
    """Gangs left waiting because room for all their pods at once cannot be made (one entry in
    `waiting` too, under their first pod): nobody is evicted for them."""


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
        """Whether the candidate's team keeps its guarantee after losing it (and its gang mates)
        too."""
        team = candidate.team
        if team is None or team == self.team:
            return True
        guaranteed = self.guaranteed.get(team, {})
        held = self.held_after(team, taken)
        return all(
            held.get(fam, 0) - n >= guaranteed.get(fam, 0) for fam, n in candidate.families.items()
        )


def _count(ledger: dict[str, dict[str, int]], candidate: Candidate, sign: int) -> None:
    if candidate.team is None:
        return
    held = ledger.setdefault(candidate.team, {})
    for fam, n in candidate.families.items():
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


def _pdb_blocks(
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


@dataclass(kw_only=True)
class _Ledger:
    """What earlier preemptions of this pass already took or reserved."""

    free: dict[str, dict[str, int]]
    usage: dict[str, dict[str, int]]
    freeing: frozenset[str] = frozenset()
    evicted: set[str] = field(default_factory=set)
    gangs: dict[tuple[str, str], list[Pod]] = field(default_factory=dict)
    refused: frozenset[str] = frozenset()
    """Victims the policy refused when acting on a gang's plan: planned again without them."""
    disruptions: dict[tuple[str, str], int] = field(default_factory=dict)
    """Evictions already planned under each PodDisruptionBudget (namespace, name)."""

    def copy(self) -> _Ledger:
        return replace(
            self,
            free={node: dict(left) for node, left in self.free.items()},
            usage={team: dict(held) for team, held in self.usage.items()},
            evicted=set(self.evicted),
            disruptions=dict(self.disruptions),
        )

    def commit(self, option: NodeOption, pod: Pod, pdbs: list[DisruptionBudget]) -> None:
        """Count the option's victims (with their gangs) as gone and the pod as placed."""
        for victim in option.victims:
            for gone in (victim.pod, *victim.mates):
                self.evicted.add(gone.uid)
                if gone.node_name in self.free:
                    left = self.free[gone.node_name]
                    for r, n in gone.demand.items():
                        left[r] = left.get(r, 0) + n
                team = victim.team
                if team:
                    held = self.usage.setdefault(team, {})
                    for fam, n in families(gone).items():
                        held[fam] = held.get(fam, 0) - n
                for budget in pdbs:
                    if budget.selects(gone):
                        key = (budget.namespace, budget.name)
                        self.disruptions[key] = self.disruptions.get(key, 0) + 1
        left = self.free[option.node]
        for r, n in pod.demand.items():
            left[r] = left.get(r, 0) - n


@dataclass(frozen=True, slots=True, kw_only=True)
class _Context:
    """What every planning step of one pass reads: the snapshot and the configuration."""

    nodes: dict[str, Node]
    by_node: dict[str, list[Pod]]
    pdbs: list[DisruptionBudget]
    fleet: FleetView
    priority_of: Any
    now: float


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
        free=free,
        usage=team_usage(pods, fleet, freeing=freeing),
        freeing=frozenset(freeing),
        gangs=gang_members,
    )
    context = _Context(
        nodes=nodes, by_node=by_node, pdbs=pdbs, fleet=fleet, priority_of=priority_of, now=now
    )
    waiting.sort(key=lambda p: (-priority_of(p), p.unschedulable_since, p.namespace, p.name))
    handled: set[tuple[str, str]] = set()
    for pod in waiting:
        assert pod.unschedulable_since is not None
        key = gang_of(pod)
        if key is not None and key in handled:
            continue  # decided with its gang
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
                _serve_gang(
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


def _serve_gang(
    plan: PreemptPlan,
    key: tuple[str, str],
    min_member: int,
    running: list[Pod],
    members: list[Pod],
    pending_seconds: float,
    context: _Context,
    ledger: _Ledger,
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

    def planned(refused: frozenset[str]) -> tuple[GangPlan | None, str, _Ledger]:
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
    context: _Context,
    ledger: _Ledger,
) -> tuple[GangPlan | None, str, _Ledger]:
    """Room for `still` of the pending pods (in `order`), each on its node given the placements
    before it, on a copy of the ledger. The first pod that can be placed tries each of its
    `GANG_FIRST_CHOICES` best nodes, the others take their best node in turn; of the complete
    plans the one evicting the fewest pods (victims and their mates) wins, then the least work
    lost, then the node names. None when fewer than `still` pods can be placed."""
    first: tuple[int, list[NodeOption]] | None = None
    for i, pod in enumerate(order):
        options, _ = _node_options(pod, context, ledger)
        if options:
            first = (i, options)
            break
    best: tuple[tuple[Any, ...], list[GangPlacement], _Ledger] | None = None
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
    pods: list[Pod], still: int, first: NodeOption, context: _Context, trial: _Ledger
) -> tuple[list[GangPlacement], list[str]]:
    """The first pod on `first`, then each next pod on its best node given those before it
    (committed to `trial`), until `still` are placed: the placements and the pods left out."""
    placements: list[GangPlacement] = []
    failures: list[str] = []
    for pod in pods:
        if len(placements) == still:
            break
        if placements:
            options, _ = _node_options(pod, context, trial)
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


def _node_options(
    pod: Pod, context: _Context, ledger: _Ledger
) -> tuple[list[NodeOption], str | None]:
    """Every node where the pod fits once victims go, best first (fewest victims, least work
    lost, name), and the first node where it fits already with no victim at all (then that
    node is the one option, with no victims)."""
    priority = context.priority_of(pod)
    team = context.fleet.namespaces.get(pod.namespace)
    options: list[NodeOption] = []
    for name in sorted(context.nodes):
        if not fits(pod, context.nodes[name]):
            continue
        need = {r: n - ledger.free[name].get(r, 0) for r, n in pod.demand.items()}
        if all(n <= 0 for n in need.values()):
            return [NodeOption(node=name, need=need, candidates=(), victims=())], name
        candidates = sorted(
            (
                c
                for victim in context.by_node.get(name, ())
                if (c := _candidate(victim, pod, priority, team, context, ledger)) is not None
            ),
            key=victim_order,
        )
        victims = select_victims(candidates, need, Quota.of(context.fleet, ledger.usage, team))
        if victims is None:
            continue
        options.append(
            NodeOption(node=name, need=need, candidates=tuple(candidates), victims=tuple(victims))
        )
    options.sort(key=lambda o: (len(o.victims), o.work_lost, o.node))
    return options, None


def _plan_one(
    pod: Pod, pending: float, context: _Context, ledger: _Ledger
) -> tuple[Preemption | None, str]:
    if (pod.workload_type or "") not in context.fleet.workload_types:
        return None, f"workload type {pod.workload_type!r} is unknown, so no victim is allowed"
    options, free_node = _node_options(pod, context, ledger)
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


def _candidate(
    victim: Pod,
    preemptor: Pod,
    priority: int,
    team: str | None,
    context: _Context,
    ledger: _Ledger,
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
    wt = fleet.workload_types.get(victim.workload_type or "")
    if wt is None:
        return None
    started = victim.started if victim.started is not None else victim.created
    running = max(0.0, now - started)
    if running < wt.min_runtime_seconds:
        return None
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
    if _pdb_blocks(victim, context.pdbs, ledger.disruptions) is not None:
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


def opa_input(
    preemption: Preemption, victim: Candidate, fleet: FleetView, usage: dict[str, int], now: float
) -> dict[str, Any]:
    """The preempt decision input (docs/contracts.md). A victim that belongs to a gang is
    judged for the whole gang: `victim.gang` names every pod that leaves with it and the devices
    they hold together, so the one decision that allows the victim allows its mates' eviction."""
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
            "gang": {
                "pods": [victim.pod.key, *(mate.key for mate in victim.mates)],
                "devices": victim.families,
            },
        },
        "now": int(now),
    }
