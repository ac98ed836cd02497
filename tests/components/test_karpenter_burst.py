"""Burst pools as NodePools (pure): in a cluster that reserves a pool for a team, the pools open
to every team carry the burst taint and label of their tier, so Karpenter and the scheduler keep
work off them unless it tolerates the taint; the reserved pool, and every pool of a cluster
without reservations, stay as they were."""

from __future__ import annotations

from typing import Any

from fleet.config import parse_fleet
from fleet.karpenter import BURST_TIER, karpenter_manifests
from tests.components.component_testkit import minimal_raw_fleet
from tests.localfleet.karpenter_kit import ON_DEMAND, SPOT, karpenter_fleet


def pools(reserve: bool) -> dict[str, dict[str, Any]]:
    raw = minimal_raw_fleet()
    karpenter_fleet(raw)
    if reserve:
        team = raw["teams"][0]["name"]
        raw["clusters"][0]["pools"].append(
            {
                "name": "kp-h100-reserved",
                "model": "h100-80gb",
                "machine_type": "p5.48xlarge",
                "max_nodes": 1,
                "teams": [team],
            }
        )
    fleet = parse_fleet(raw)
    return {
        m["metadata"]["name"]: m["spec"]["template"]
        for m in karpenter_manifests(fleet, fleet.clusters[0])
        if m["kind"] == "NodePool"
    }


def burst_taints(template: dict[str, Any]) -> list[dict[str, str]]:
    return [t for t in template["spec"]["taints"] if t["key"] == BURST_TIER]


def test_open_pools_of_a_cluster_with_a_reservation_are_burst_tiers() -> None:
    found = pools(reserve=True)
    assert burst_taints(found[ON_DEMAND]) == [
        {"key": BURST_TIER, "value": "on-demand", "effect": "NoSchedule"}
    ]
    assert found[ON_DEMAND]["metadata"]["labels"][BURST_TIER] == "on-demand"
    assert burst_taints(found[SPOT]) == [
        {"key": BURST_TIER, "value": "spot", "effect": "NoSchedule"}
    ]
    assert found[SPOT]["metadata"]["labels"][BURST_TIER] == "spot"
    reserved = found["kp-h100-reserved"]
    assert not burst_taints(reserved) and BURST_TIER not in reserved["metadata"]["labels"]
    # the pool's own taints are kept beside the burst taint
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in found[
        ON_DEMAND
    ]["spec"]["taints"]


def test_without_a_reservation_no_pool_is_a_burst_tier() -> None:
    for template in pools(reserve=False).values():
        assert not burst_taints(template)
        assert BURST_TIER not in template["metadata"]["labels"]
