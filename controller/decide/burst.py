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
Wiring it to an autoscaler (a NodePool per tier, Karpenter's weights) is not done here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from controller.config import FleetView
from controller.observe.model import Pod

TIERS: Final = ("reserved", "on-demand", "spot")
HORIZON_SECONDS: Final = 3600
RESIDENCY: Final = "fleetplane.dev/data-residency"
"""Pod label: a region or region prefix the work's data must stay in (`eu` holds eu-west-1)."""


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
