"""Bursting: may a team's waiting work spill onto the next, more expensive capacity tier?

Tiers, cheapest first (`TIERS`): `reserved` (a pool reserved for the team: its own capacity,
committed or reserved), then `on-demand`, then `spot`. A pool's tier for a team is `reserved`
when the pool lists the team, else its capacity type; pools reserved for other teams are not the
team's to burst onto. The rules (the next tier the workload type may use, a checkpoint location
for types that must checkpoint on spot, budget headroom up to the warning line, data residency)
are the policy's, `fleetplane/decisions/burst`; this module orders the pools and builds the
policy's input for each tier after the one the work waits on (`burst_inputs`), so the caller
asks them in order and takes the first allowed.

The estimate put to the budget is the work's devices x the model's hourly price on that tier x
its expected run: the workload type's `default_max_runtime_seconds`, or `HORIZON_SECONDS` for a
type without one (an hour of burst at a time; the next decision judges the next hour).

The mechanism (docs/autoscaling.md, "Bursting"): burst pools' nodes carry the taint
`fleetplane.dev/burst-tier=<tier>:NoSchedule` (`fleet.karpenter`), which Karpenter and Volcano
both honour from the pod's spec alone. The team's open tier is an annotation of its Volcano Queue
(`BURST_TIER`, with `BURST_SINCE` and `BURST_REASON`); the controller adds the tolerations of the
open tiers to the team's waiting pods (tolerations are the one placement field a pending pod may
gain), and takes the annotation off when the team has nothing waiting and nothing on a burst
node. `plan_bursts` decides all of it on the pass's snapshot; `controller.act.burst` asks the
policy and writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from controller.config import FleetView
from controller.observe.model import Node, Pod, is_accelerator
from fleet import labels as keys

TIERS: Final = ("reserved", "on-demand", "spot")
HORIZON_SECONDS: Final = 3600
RESIDENCY: Final = "fleetplane.dev/data-residency"
"""Pod label: a region or region prefix the work's data must stay in (`eu` holds eu-west-1)."""
BURST_TIER: Final = "fleetplane.dev/burst-tier"
"""The taint key and node label of burst pools (value: the tier), and the team Queue's
annotation naming the last tier open to it (absent: only its reservation)."""
BURST_SINCE: Final = "fleetplane.dev/burst-since"
"""Queue annotation: when (epoch seconds) the open tier was opened."""
BURST_REASON: Final = "fleetplane.dev/burst-reason"
"""Queue annotation: the policy's reasons for opening it."""


@dataclass(frozen=True, kw_only=True)
class PoolTier:
    name: str
    tier: str
    model: str
    resource: str
    region: str


def pool_tiers(
    fleet: FleetView, team: str, regions: Mapping[str, str] | None = None
) -> list[PoolTier]:
    """The pools `team` may run on, cheapest tier first, then by name. `regions` maps a
    cluster to its region (the data document does not carry it); unknown is ""."""
    out: list[PoolTier] = []
    for name, pool in fleet.document.pools.items():
        teams = tuple(pool.teams or ())
        if (teams and team not in teams) or not pool.model or not pool.resource:
            continue
        out.append(
            PoolTier(
                name=name,
                tier="reserved" if teams else pool.capacity_type,
                model=pool.model,
                resource=pool.resource,
                region=(regions or {}).get(pool.cluster or "", ""),
            )
        )
    return sorted(out, key=lambda p: (TIERS.index(p.tier), p.name))


def expected_seconds(fleet: FleetView, workload_type: str | None) -> int:
    found = fleet.workload_types.get(workload_type or "")
    bound = found.default_max_runtime_seconds if found else None
    return bound or HORIZON_SECONDS


def estimate_usd(fleet: FleetView, pod: Pod, pool: PoolTier) -> float | None:
    """USD of the work's expected run on `pool`; None when the model has no price there."""
    model = fleet.models.get(pool.model)
    if model is None:
        return None
    price = model.price_per_hour_usd.get("on-demand" if pool.tier == "reserved" else pool.tier)
    if price is None:
        return None
    devices = pod.demand.get(pool.resource, 0)
    return round(devices * price * expected_seconds(fleet, pod.workload_type) / 3600, 2)


def burst_inputs(
    pod: Pod,
    fleet: FleetView,
    team: str,
    from_tier: str,
    pools: list[PoolTier],
    now: float,
) -> list[tuple[PoolTier, dict[str, Any]]]:
    """The policy's input for each pool of a tier after `from_tier` that serves the pod's
    accelerator (its resource), cheapest tier first."""
    if from_tier not in TIERS or pod.unschedulable_since is None:
        return []
    after = TIERS.index(from_tier)
    out: list[tuple[PoolTier, dict[str, Any]]] = []
    for pool in pools:
        if TIERS.index(pool.tier) <= after or not pod.demand.get(pool.resource):
            continue
        estimate = estimate_usd(fleet, pod, pool)
        if estimate is None:
            continue
        out.append(
            (
                pool,
                {
                    "team": team,
                    "workload_type": pod.workload_type or "",
                    "pod": pod.manifest(),
                    "from_tier": from_tier,
                    "to_tier": pool.tier,
                    "to_pool": {"name": pool.name, "region": pool.region},
                    "estimate_usd": estimate,
                    "pending_seconds": int(max(0.0, now - pod.unschedulable_since)),
                    "now": int(now),
                },
            )
        )
    return out


# --- the pass's plan ---------------------------------------------------------------------------


def tolerations_for(tier: str) -> list[dict[str, str]]:
    """What a pod tolerates to run on every tier up to `tier`: the burst taint of each tier
    after `reserved`, and on spot the spot pools' own taint."""
    if tier not in TIERS:
        return []
    out = [
        {"key": BURST_TIER, "operator": "Equal", "value": t, "effect": "NoSchedule"}
        for t in TIERS[1 : TIERS.index(tier) + 1]
    ]
    if tier == "spot":
        out.append({"key": keys.SPOT_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"})
    return out


def missing_tolerations(pod: Pod, tier: str) -> list[dict[str, str]]:
    return [t for t in tolerations_for(tier) if t not in pod.tolerations]


@dataclass(frozen=True, kw_only=True)
class TeamBurst:
    """One team as the pass found it. tier: the last tier open to it (`reserved`: none beyond
    its own). waiting: its accelerator pods unschedulable for at least the wait, oldest first.
    pending: any of its accelerator pods not yet placed. on_burst: accelerators its running
    pods hold on burst nodes, by (tier, model)."""

    team: str
    queue: str
    tier: str
    since: float | None
    waiting: list[Pod] = field(default_factory=list)
    pending: int = 0
    on_burst: dict[tuple[str, str], int] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Ask:
    """Ask the policy, in order, whether `team` may open the next tier; the first allowed
    input opens its `to_tier`. `tier` is the tier open when it was planned: the opening is
    written only while the Queue still says so."""

    team: str
    queue: str
    tier: str
    claimant: Pod
    inputs: list[tuple[PoolTier, dict[str, Any]]]
    waiting: list[Pod]


@dataclass(frozen=True, kw_only=True)
class Admit:
    pod: Pod
    team: str
    tier: str
    tolerations: list[dict[str, str]]


@dataclass(frozen=True, kw_only=True)
class Close:
    team: str
    queue: str
    tier: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class BurstPlan:
    teams: list[TeamBurst]
    asks: list[Ask]
    admits: list[Admit]
    closes: list[Close]


def open_tier(annotations: Mapping[str, str]) -> str:
    found = annotations.get(BURST_TIER, "reserved")
    return found if found in TIERS else "reserved"


def since_of(annotations: Mapping[str, str]) -> float | None:
    try:
        return float(annotations[BURST_SINCE])
    except (KeyError, ValueError):
        return None


def may_burst(pod: Pod) -> bool:
    """Pending accelerator work that a toleration can move: not pinned to one pool by its
    nodeSelector (a pool is a fixed choice), not exempt, not being deleted."""
    return (
        pod.phase == "Pending"
        and not pod.node_name
        and pod.devices > 0
        and not pod.deleting
        and not pod.exempt
        and keys.POOL not in pod.node_selector
    )


def team_bursts(
    pods: list[Pod],
    nodes: Iterable[Node],
    fleet: FleetView,
    queues: Mapping[str, Mapping[str, str]],
    now: float,
    wait_seconds: float,
) -> list[TeamBurst]:
    """Each team with a Volcano Queue (`queues`: name -> annotations) as the pass found it."""
    burst_nodes = {n.name: n for n in nodes if n.labels.get(BURST_TIER) in TIERS}
    out: list[TeamBurst] = []
    for name in sorted(fleet.teams):
        declared = fleet.document.teams.get(name)
        queue = (declared.queue if declared else None) or name
        if queue not in queues:
            continue
        mine = [p for p in pods if fleet.namespaces.get(p.namespace) == name]
        waiting = sorted(
            (
                p
                for p in mine
                if may_burst(p)
                and p.unschedulable_since is not None
                and now - p.unschedulable_since >= wait_seconds
            ),
            key=lambda p: (p.unschedulable_since or 0.0, p.key),
        )
        on_burst: dict[tuple[str, str], int] = {}
        for pod in mine:
            node = burst_nodes.get(pod.node_name or "")
            if node is None or pod.phase != "Running":
                continue
            model = fleet.model_of_node(node.labels)
            key = (node.labels[BURST_TIER], model.name if model else "")
            devices = sum(n for r, n in pod.demand.items() if is_accelerator(r))
            on_burst[key] = on_burst.get(key, 0) + devices
        out.append(
            TeamBurst(
                team=name,
                queue=queue,
                tier=open_tier(queues[queue]),
                since=since_of(queues[queue]),
                waiting=waiting,
                pending=sum(1 for p in mine if may_burst(p)),
                on_burst=on_burst,
            )
        )
    return out


def plan_bursts(
    pods: list[Pod],
    nodes: Iterable[Node],
    fleet: FleetView,
    queues: Mapping[str, Mapping[str, str]],
    now: float,
    *,
    wait_seconds: float,
    regions: Mapping[str, str] | None = None,
) -> BurstPlan:
    """Per team: its waiting pods admitted to the tiers already open to it (the tolerations
    they lack); when work still waits after the wait since the last opening, an ask for the
    next tier (its policy inputs, the estimate for all the team's waiting work of the
    claimant's pools); and the tier closed when nothing waits and nothing runs on a burst
    node."""
    teams = team_bursts(pods, nodes, fleet, queues, now, wait_seconds)
    asks: list[Ask] = []
    admits: list[Admit] = []
    closes: list[Close] = []
    for state in teams:
        for pod in state.waiting:
            lacking = missing_tolerations(pod, state.tier)
            if lacking:
                admits.append(Admit(pod=pod, team=state.team, tier=state.tier, tolerations=lacking))
        # Only work that has had its chance on the open tiers asks for the next one.
        tried = [p for p in state.waiting if not missing_tolerations(p, state.tier)]
        settled = state.since is None or now - state.since >= wait_seconds
        if tried and state.tier != TIERS[-1] and settled:
            claimant = tried[0]
            inputs = burst_inputs(
                claimant, fleet, state.team, state.tier, pool_tiers(fleet, state.team, regions), now
            )
            for pool, given in inputs:
                estimates = [estimate_usd(fleet, p, pool) or 0.0 for p in state.waiting]
                given["estimate_usd"] = round(sum(estimates), 2)
            if inputs:
                asks.append(
                    Ask(
                        team=state.team,
                        queue=state.queue,
                        tier=state.tier,
                        claimant=claimant,
                        inputs=inputs,
                        waiting=state.waiting,
                    )
                )
        if state.tier != "reserved" and not state.pending and not state.on_burst:
            closes.append(
                Close(
                    team=state.team,
                    queue=state.queue,
                    tier=state.tier,
                    reason=f"team {state.team} has no work waiting and none on a burst node",
                )
            )
    return BurstPlan(teams=teams, asks=asks, admits=admits, closes=closes)
