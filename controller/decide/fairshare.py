"""Fair share taken back: when a team under its deserved share has accelerator work waiting,
the running work of teams above their share that makes room for it, least work lost first.

Volcano's `reclaim` action is off (the controller is the one preemptor, fleet/volcano.py), so
nothing else gives a team back the share its queue's weight promises once another team has
filled the fleet.

**Pools.** Shares are counted per pool: a device family (MIG devices count as GPUs) on the
nodes of one accelerator model (`FleetView.model_of_node`; nodes of no configured model form
the family's pool of model ""). A pool's capacity is the allocatable devices of its Ready,
schedulable nodes, less what pods of no team (or of a team without a queue) hold there: no
team can have it. A running pod counts in the pool of its node; a pending pod in the pool of the
model its node selector names, or, when it names none, in the only pool of its family (with
several, it is not served: which model it waits for is unknown).

**Deserved share.** Each team's queue (the Volcano Queue named after the team, read live:
`weight`, `reclaimable`, `guarantee`) has a weight. In a pool, a team's demand is what it holds
plus what it has pending there. The capacity is divided by weight among the teams with demand,
a team never deserving more than its demand, and what a team does not need is divided again
among the others (water-filling, as Volcano's proportion plugin does): two teams that both want
more than the pool deserve `capacity * weight / sum(weights)` each. A team's queue guarantee
(per resource) bounds its deserved share from below (capped at its demand). A team without a
queue takes part neither as claimant nor as victim.

**Who is served.** A *claimant* is a team holding less than its deserved share in a pool with
work there waiting at least `pending_seconds` (its pod Pending, unscheduled, not being deleted;
its PodGroup, if seen, Pending or Inqueue). Claimants are served most starved first (held over
deserved), their pods highest priority first, then longest waiting; a claimant stops being
served once it holds its deserved share. A pending *gang* (PodGroup `minMember` above 1) is
served only if room for all its still-unplaced pods is made in the same pass, on a trial that
is dropped otherwise.

**Victims** (`decide.preempt`'s `Candidate`, comparator `victim_order` and `select_victims`):
running pods of another team whose queue is `reclaimable`, preemptible (label, else its type),
not exempt, past their type's `min_runtime_seconds`, not kept by a PodDisruptionBudget, on a
node where the claimant's pod fits (`decide.preempt.fits`); a gang member only with all its
mates, which go with it. Least work lost first: least time since the last checkpoint, then
lower priority, fewer devices, namespace and name. A victim is taken only while its team, after
losing it (and its mates, and the victims of that team chosen before), still holds at least
its own deserved share in the pool (`decide.preempt.Quota` with the deserved shares as the
floor): reclaim never pushes a team below its share, so shares converge instead of swinging.
The node needing the fewest victims wins, then the least work lost, then the name.

Every victim is put to `fleetplane/decisions/fairshare` (`opa_input`) before `act.fairshare`
evicts it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.config import FleetView
from controller.decide.preempt import (
    Candidate,
    Quota,
    fits,
    select_victims,
    victim_gangs,
    victim_order,
    workload_key,
)
from controller.decide.preempt.candidates import pdb_blocks, run_so_far
from controller.decide.workloads import gang_of, preemptible
from controller.observe.model import DisruptionBudget, Node, Pod, family, is_accelerator

PENDING_GROUP_PHASES = frozenset({"Pending", "Inqueue"})
"""PodGroup phases of work that waits for room (Volcano: not yet enqueued, or enqueued and not
yet placed)."""

Pool = tuple[str, str]
"""(device family, accelerator model name; "" for nodes of no configured model)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueShare:
    """What fair share reads of a team's Volcano Queue."""

    name: str
    weight: int
    reclaimable: bool
    guarantee: dict[str, int] = field(default_factory=dict)


def queue_from_api(raw: Mapping[str, Any]) -> QueueShare | None:
    """The queue's weight, reclaimable and guarantee (None when it has no name). Volcano's
    defaults: weight 1, reclaimable true."""
    name = (raw.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        return None
    spec = raw.get("spec") or {}
    weight = spec.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int) or weight < 1:
        weight = 1
    guarantee: dict[str, int] = {}
    for resource, value in ((spec.get("guarantee") or {}).get("resource") or {}).items():
        try:
            guarantee[family(resource)] = int(str(value))
        except ValueError:
            continue
    return QueueShare(
        name=name,
        weight=weight,
        reclaimable=spec.get("reclaimable", True) is not False,
        guarantee=guarantee,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TeamShare:
    """One team in one pool, as the pass found it."""

    team: str
    pool: Pool
    weight: int
    reclaimable: bool
    held: int
    pending: int
    deserved: float

    @property
    def under(self) -> bool:
        return self.held < self.deserved


@dataclass(frozen=True, slots=True, kw_only=True)
class Reclaim:
    """Room for one pending pod of a team under its share: its node and the victims there,
    with what each side held and deserved in the pool when it was chosen."""

    claimant: Pod
    team: str
    pool: Pool
    priority: int
    pending_seconds: float
    node: str
    held: int
    deserved: float
    victims: tuple[Candidate, ...]
    victim_held: dict[str, int]
    """Each victim team's devices in the pool before this reclaim's victims go."""
    deserved_of: dict[str, float]
    reclaimable_of: dict[str, bool]


@dataclass(kw_only=True)
class FairSharePlan:
    shares: list[TeamShare] = field(default_factory=list)
    reclaims: list[Reclaim] = field(default_factory=list)
    waiting: list[tuple[Pod, str]] = field(default_factory=list)
    capacity: dict[Pool, int] = field(default_factory=dict)


def water_fill(
    capacity: float, demand: Mapping[str, int], weight: Mapping[str, int]
) -> dict[str, float]:
    """Capacity divided by weight among the teams with demand, none above its demand, what one
    does not need divided again among the rest."""
    out = {team: 0.0 for team in demand}
    active = {team for team, n in demand.items() if n > 0}
    left = max(0.0, capacity)
    while active and left > 1e-9:
        total = sum(weight[t] for t in active)
        offer = {t: left * weight[t] / total for t in active}
        sated = {t for t in active if demand[t] - out[t] <= offer[t] + 1e-9}
        if not sated:
            for t in active:
                out[t] += offer[t]
            break
        for t in sated:
            left -= demand[t] - out[t]
            out[t] = float(demand[t])
        active -= sated
    return out


@dataclass(kw_only=True)
class _Ledger:
    """What the pass has taken so far: free devices per node, devices per team and pool, the
    victims chosen."""

    free: dict[str, dict[str, int]]
    held: dict[str, dict[Pool, int]]
    evicted: set[str] = field(default_factory=set)
    disruptions: dict[tuple[str, str], int] = field(default_factory=dict)

    def copy(self) -> _Ledger:
        return _Ledger(
            free={n: dict(f) for n, f in self.free.items()},
            held={t: dict(h) for t, h in self.held.items()},
            evicted=set(self.evicted),
            disruptions=dict(self.disruptions),
        )


@dataclass(frozen=True, kw_only=True)
class _Pass:
    """What every planning step of one pass reads."""

    fleet: FleetView
    nodes: dict[str, Node]
    pool_of_node: dict[str, str]
    by_node: dict[str, list[Pod]]
    gangs: dict[tuple[str, str], list[Pod]]
    pdbs: list[DisruptionBudget]
    queues: dict[str, QueueShare]
    deserved: dict[str, dict[Pool, float]]
    priority_of: Any
    now: float
    freeing: frozenset[str]


def _pod_pool(pod: Pod, fleet: FleetView, pools: Iterable[Pool]) -> tuple[Pool | None, str]:
    fams = {family(r) for r, n in pod.demand.items() if is_accelerator(r) and n > 0}
    if len(fams) != 1:
        return None, "requests no accelerator, or several families"
    fam = fams.pop()
    for model in fleet.models.values():
        if pod.node_selector.get(model.node_label) == model.label_value:
            return (fam, model.name), ""
    of_family = sorted({p for p in pools if p[0] == fam})
    if len(of_family) == 1:
        return of_family[0], ""
    return None, f"names no accelerator model and {len(of_family)} pools of {fam} exist"


def counted(node: Node) -> bool:
    """Whether the node's devices are part of its pool's capacity (Ready, schedulable)."""
    return node.ready and not node.unschedulable


def waits_for_accelerators(pod: Pod) -> bool:
    """Whether the pod is unscheduled work that wants accelerators (a possible claim)."""
    return (
        not pod.node_name
        and pod.phase == "Pending"
        and not pod.deleting
        and any(is_accelerator(r) and n > 0 for r, n in pod.demand.items())
    )


def plan_fair_share(
    pods: list[Pod],
    nodes: dict[str, Node],
    pdbs: list[DisruptionBudget],
    fleet: FleetView,
    queues: Mapping[str, QueueShare],
    priority_of: Any,
    now: float,
    *,
    pending_seconds: float,
    group_phases: Mapping[tuple[str, str], str] | None = None,
    min_members: Mapping[tuple[str, str], int] | None = None,
    freeing: set[str] | frozenset[str] = frozenset(),
) -> FairSharePlan:
    """`queues`: the teams' Volcano Queues by name. `group_phases`: each PodGroup's phase by
    (namespace, name). `min_members`: each PodGroup's `minMember`. `freeing`: uids of pods this
    pass already removes (their devices count as free)."""
    plan = FairSharePlan()
    group_phases = group_phases or {}
    min_members = min_members or {}
    pool_of_node: dict[str, str] = {}
    for node in nodes.values():
        model = fleet.model_of_node(node.labels)
        pool_of_node[node.name] = model.name if model else ""
        if not counted(node):
            continue
        for resource, n in node.accelerators.items():
            key = (family(resource), pool_of_node[node.name])
            plan.capacity[key] = plan.capacity.get(key, 0) + n
    free: dict[str, dict[str, int]] = {name: dict(node.allocatable) for name, node in nodes.items()}
    held: dict[str, dict[Pool, int]] = {}
    by_node: dict[str, list[Pod]] = {}
    for pod in pods:
        if not pod.node_name or pod.terminal:
            continue
        by_node.setdefault(pod.node_name, []).append(pod)
        if pod.deleting or pod.uid in freeing or pod.node_name not in nodes:
            continue
        for r, n in pod.demand.items():
            free[pod.node_name][r] = free[pod.node_name].get(r, 0) - n
        team = fleet.namespaces.get(pod.namespace)
        for r, n in pod.demand.items():
            if not is_accelerator(r):
                continue
            key = (family(r), pool_of_node[pod.node_name])
            if team is None or team not in queues:
                if counted(nodes[pod.node_name]):  # outside fair share, on counted capacity
                    plan.capacity[key] = plan.capacity.get(key, 0) - n
            else:
                held.setdefault(team, {})[key] = held.setdefault(team, {}).get(key, 0) + n

    waiting: dict[str, list[tuple[Pod, Pool, float]]] = {}
    pending: dict[str, dict[Pool, int]] = {}
    for pod in pods:
        if not waits_for_accelerators(pod) or pod.uid in freeing:
            continue
        team = fleet.namespaces.get(pod.namespace)
        if team is None:
            continue
        group = gang_of(pod)
        if group is not None and group_phases.get(group, "Pending") not in PENDING_GROUP_PHASES:
            continue  # its PodGroup runs: a pod beyond what the gang needs, not a claim
        pool, why = _pod_pool(pod, fleet, plan.capacity)
        if pool is None:
            plan.waiting.append((pod, why))
            continue
        devices = sum(n for r, n in pod.demand.items() if is_accelerator(r))
        pending.setdefault(team, {})[pool] = pending.setdefault(team, {}).get(pool, 0) + devices
        since = pod.unschedulable_since if pod.unschedulable_since is not None else pod.created
        waiting.setdefault(team, []).append((pod, pool, now - since))

    deserved: dict[str, dict[Pool, float]] = {}
    for pool, capacity in sorted(plan.capacity.items()):
        demand = {
            team: held.get(team, {}).get(pool, 0) + pending.get(team, {}).get(pool, 0)
            for team in queues
            if team in fleet.teams
        }
        weights = {team: queues[team].weight for team in demand}
        shares = water_fill(capacity, demand, weights)
        for team, weighted in shares.items():
            floor = min(queues[team].guarantee.get(pool[0], 0), demand[team])
            fair = max(weighted, float(floor))
            deserved.setdefault(team, {})[pool] = fair
            if demand[team]:
                plan.shares.append(
                    TeamShare(
                        team=team,
                        pool=pool,
                        weight=queues[team].weight,
                        reclaimable=queues[team].reclaimable,
                        held=held.get(team, {}).get(pool, 0),
                        pending=pending.get(team, {}).get(pool, 0),
                        deserved=fair,
                    )
                )

    context = _Pass(
        fleet=fleet,
        nodes=nodes,
        pool_of_node=pool_of_node,
        by_node=by_node,
        gangs=victim_gangs(pods),
        pdbs=pdbs,
        queues=dict(queues),
        deserved=deserved,
        priority_of=priority_of,
        now=now,
        freeing=frozenset(freeing),
    )
    ledger = _Ledger(free=free, held=held)

    def starved(share: TeamShare) -> tuple[float, str, Pool]:
        return (share.held / share.deserved if share.deserved else 1.0, share.team, share.pool)

    for share in sorted((s for s in plan.shares if s.under and s.pending), key=starved):
        if share.team not in queues:
            continue
        handled: set[tuple[str, str]] = set()
        mine = [w for w in waiting.get(share.team, []) if w[1] == share.pool]
        mine.sort(key=lambda w: (-priority_of(w[0]), -w[2], w[0].namespace, w[0].name))
        for pod, pool, waited in mine:
            if ledger.held.get(share.team, {}).get(pool, 0) >= share.deserved:
                break
            if waited < pending_seconds:
                plan.waiting.append(
                    (pod, f"pending {waited:.0f}s, reclaims after {pending_seconds:.0f}s")
                )
                continue
            gang_key = gang_of(pod)
            if gang_key is not None and gang_key in handled:
                continue
            members = context.gangs.get(gang_key or ("", ""), [pod])
            need_together = min_members.get(gang_key or ("", ""), 1)
            running = [m for m in members if m.node_name and not m.deleting]
            unplaced = [m for m in members if not m.node_name and not m.deleting]
            if gang_key is not None and need_together > 1:
                handled.add(gang_key)
                count = need_together - len(running)
                if count <= 0:
                    pass  # enough of its gang runs: this pod alone will do
                elif len(unplaced) < count:
                    plan.waiting.append(
                        (pod, f"gang {gang_key[1]} has {len(unplaced)} pods waiting, needs {count}")
                    )
                    continue
                else:
                    trial = ledger.copy()
                    served: list[Reclaim] = []
                    ordered = sorted(unplaced, key=lambda m: (-sum(m.demand.values()), m.name))
                    for member in ordered[:count]:
                        reclaim, why = _plan_one(member, share, pool, waited, context, trial)
                        if reclaim is None:
                            break
                        served.append(reclaim)
                    else:
                        ledger.free, ledger.held = trial.free, trial.held
                        ledger.evicted, ledger.disruptions = trial.evicted, trial.disruptions
                        plan.reclaims.extend(r for r in served if r.victims)
                        continue
                    plan.waiting.append(
                        (
                            pod,
                            f"gang {gang_key[1]}: room for all {count} pods cannot be taken back: {why}",
                        )
                    )
                    continue
            reclaim, why = _plan_one(pod, share, pool, waited, context, ledger)
            if reclaim is None:
                plan.waiting.append((pod, why))
            elif reclaim.victims:
                plan.reclaims.append(reclaim)
    return plan


def _candidate(
    victim: Pod,
    claimant: Pod,
    team: str,
    pool: Pool,
    context: _Pass,
    ledger: _Ledger,
    *,
    alone: bool = False,
) -> Candidate | None:
    """The victim as a candidate for the claimant's pod, or None when it may not be one."""
    fleet = context.fleet
    if victim.deleting or victim.terminal or victim.exempt or victim.phase != "Running":
        return None
    if victim.uid in ledger.evicted or victim.uid in context.freeing:
        return None
    victim_team = fleet.namespaces.get(victim.namespace)
    queue = context.queues.get(victim_team or "")
    if victim_team is None or victim_team == team or queue is None or not queue.reclaimable:
        return None
    frees = {r: n for r, n in victim.demand.items() if r in claimant.demand}
    if (not frees and not alone) or not preemptible(victim, fleet):
        return None
    run = run_so_far(victim, fleet, context.now)
    if run is None:
        return None
    running, since = run
    if pdb_blocks(victim, context.pdbs, ledger.disruptions) is not None:
        return None
    mates: tuple[Pod, ...] = ()
    gang = None if alone else context.gangs.get(workload_key(victim) or ("", ""))
    if gang is not None:
        mates = tuple(m for m in gang if m.uid != victim.uid)
        for mate in mates:
            if (
                not mate.node_name
                or _candidate(mate, claimant, team, pool, context, ledger, alone=True) is None
            ):
                return None  # a gang goes whole or not at all
    return Candidate(
        pod=victim,
        priority=context.priority_of(victim),
        team=victim_team,
        frees=frees,
        running_seconds=running,
        seconds_since_checkpoint=max(0.0, min(since, running)),
        mates=mates,
        mates_devices=sum(sum(m.demand.values()) for m in mates),
    )


def _plan_one(
    pod: Pod, share: TeamShare, pool: Pool, waited: float, context: _Pass, ledger: _Ledger
) -> tuple[Reclaim | None, str]:
    """Room for the pod on the node needing the fewest victims, within the victims' shares; a
    Reclaim without victims when it already fits (Volcano places it)."""
    usage = {team: {pool[0]: held.get(pool, 0)} for team, held in ledger.held.items()}
    # Devices are whole: keeping at least a share of 21.3 is keeping 22.
    floors = {
        team: {pool[0]: math.ceil(d.get(pool, 0.0) - 1e-9)} for team, d in context.deserved.items()
    }
    quota = Quota(usage=usage, guaranteed=floors, team=share.team)
    best: tuple[tuple[Any, ...], str, list[Candidate]] | None = None
    for name in sorted(context.nodes):
        node = context.nodes[name]
        if context.pool_of_node[name] != pool[1] or not fits(pod, node):
            continue
        need = {r: n - ledger.free[name].get(r, 0) for r, n in pod.demand.items()}
        if all(n <= 0 for n in need.values()):
            victims: list[Candidate] | None = []
        else:
            candidates = [
                c
                for v in context.by_node.get(name, ())
                if (c := _candidate(v, pod, share.team, pool, context, ledger)) is not None
            ]
            candidates.sort(key=victim_order)
            victims = select_victims(candidates, need, quota)
        if victims is None:
            continue
        rank = (len(victims), sum(v.work_lost for v in victims), name)
        if best is None or rank < best[0]:
            best = (rank, name, victims)
    if best is None:
        return None, (
            f"no node of pool {pool[1] or pool[0]} where reclaimable work of teams above their "
            "share makes room without taking them below theirs"
        )
    _, chosen, victims = best
    victim_held = {v.team or "": ledger.held.get(v.team or "", {}).get(pool, 0) for v in victims}
    reclaim = Reclaim(
        claimant=pod,
        team=share.team,
        pool=pool,
        priority=context.priority_of(pod),
        pending_seconds=waited,
        node=chosen,
        held=ledger.held.get(share.team, {}).get(pool, 0),
        deserved=share.deserved,
        victims=tuple(victims),
        victim_held=victim_held,
        deserved_of={t: context.deserved.get(t, {}).get(pool, 0.0) for t in victim_held},
        reclaimable_of={t: context.queues[t].reclaimable for t in victim_held},
    )
    _commit(reclaim, context, ledger)
    return reclaim, "planned"


def _commit(reclaim: Reclaim, context: _Pass, ledger: _Ledger) -> None:
    pool = reclaim.pool
    for victim in reclaim.victims:
        for gone in (victim.pod, *victim.mates):
            ledger.evicted.add(gone.uid)
            node = gone.node_name or ""
            if node in ledger.free:
                for r, n in gone.demand.items():
                    ledger.free[node][r] = ledger.free[node].get(r, 0) + n
            team_held = ledger.held.setdefault(victim.team or "", {})
            for r, n in gone.demand.items():
                if is_accelerator(r) and (family(r), context.pool_of_node.get(node, "")) == pool:
                    team_held[pool] = team_held.get(pool, 0) - n
            for budget in context.pdbs:
                if budget.selects(gone):
                    key = (budget.namespace, budget.name)
                    ledger.disruptions[key] = ledger.disruptions.get(key, 0) + 1
    for r, n in reclaim.claimant.demand.items():
        ledger.free[reclaim.node][r] = ledger.free[reclaim.node].get(r, 0) - n
    devices = sum(n for r, n in reclaim.claimant.demand.items() if is_accelerator(r))
    claimant_held = ledger.held.setdefault(reclaim.team, {})
    claimant_held[pool] = claimant_held.get(pool, 0) + devices


def opa_input(
    reclaim: Reclaim, victim: Candidate, team_held: int, capacity: int, now: float
) -> dict[str, Any]:
    """The fairshare decision input for one victim (docs/contracts.md): `team_held` is what
    the victim's team holds in the pool once the victims of this reclaim before it are gone."""
    devices = sum(
        n for pod in (victim.pod, *victim.mates) for r, n in pod.demand.items() if is_accelerator(r)
    )
    team = victim.team or ""
    return {
        "pool": {"family": reclaim.pool[0], "model": reclaim.pool[1], "capacity": capacity},
        "claimant": {
            "pod": reclaim.claimant.manifest(),
            "team": reclaim.team,
            "held": reclaim.held,
            "deserved": round(reclaim.deserved, 3),
            "pending_seconds": int(reclaim.pending_seconds),
        },
        "victim": {
            "pod": victim.pod.manifest(),
            "team": team,
            "workload_type": victim.pod.workload_type,
            "running_seconds": int(victim.running_seconds),
            "seconds_since_checkpoint": int(victim.seconds_since_checkpoint),
            "devices": devices,
            "team_held": team_held,
            "team_deserved": round(reclaim.deserved_of.get(team, 0.0), 3),
            "queue_reclaimable": reclaim.reclaimable_of.get(team, False),
            "gang": [victim.pod.key, *(mate.key for mate in victim.mates)],
        },
        "now": int(now),
    }
