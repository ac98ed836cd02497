"""The pure part of the Karpenter pools (`fleet.karpenter`): disruption budgets made from the
maintenance windows, and the KWOK provider's instance types made from the catalog and prices."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fleet.config import FleetConfig, MaintenanceWindow
from fleet.karpenter import closed_stretches, disruption_budgets, kwok_instance_types
from tests.components.test_karpenter import local_karpenter

FleetFrom = Callable[[Callable[[dict[str, Any]], None] | None], FleetConfig]
DAY = 24 * 60


@pytest.mark.parametrize(
    ("windows", "want"),
    [
        # the default: Saturday and Sunday open; Monday 00:00 to Saturday 00:00 closed
        ([{"days": ["sat", "sun"]}], [(0, 5 * DAY)]),
        # open every day: nothing closed
        ([{"days": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]}], []),
        # two nights: closed from each night's end to the next night's start
        (
            [{"days": ["mon", "wed"], "start": "02:00", "end": "05:59"}],
            [(6 * 60, 2 * DAY - 4 * 60), (2 * DAY + 6 * 60, 5 * DAY - 4 * 60)],
        ),
        # across Sunday midnight: one closed stretch, from Monday 02:00 to Sunday 22:00
        (
            [
                {"days": ["sun"], "start": "22:00", "end": "23:59"},
                {"days": ["mon"], "start": "00:00", "end": "01:59"},
            ],
            [(2 * 60, 7 * DAY - 4 * 60)],
        ),
        # closed across Sunday midnight: one stretch starting on Sunday
        ([{"days": ["tue"]}], [(2 * DAY, 6 * DAY)]),
    ],
)
def test_closed_stretches(windows: list[dict[str, Any]], want: list[tuple[int, int]]) -> None:
    assert closed_stretches([MaintenanceWindow(**w) for w in windows]) == want


def test_budgets_block_work_outside_the_windows_only(fleet_from: FleetFrom) -> None:
    pool = fleet_from(local_karpenter).pools[1]
    budgets = disruption_budgets([MaintenanceWindow(days=["tue"])], pool)
    assert budgets == [
        {"nodes": "1"},
        {
            "nodes": "0",
            "reasons": ["Underutilized", "Drifted"],
            # Wednesday 00:00 (cron day 3) for six days, to Tuesday 00:00
            "schedule": "0 0 * * 3",
            "duration": "144h0m",
        },
    ]
    # no window at all: nodes holding work are never disrupted; empty ones still go
    assert disruption_budgets([], pool)[1:] == [
        {"nodes": "0", "reasons": ["Underutilized", "Drifted"]}
    ]


def test_kwok_instance_types_from_catalog_and_prices(fleet_from: FleetFrom) -> None:
    fleet = fleet_from(local_karpenter)
    (p5,) = kwok_instance_types(fleet, fleet.clusters[0])
    assert p5["name"] == "p5.48xlarge"
    assert p5["resources"]["nvidia.com/gpu"] == "8"
    prices = {o["Requirements"][0]["values"][0]: o["Price"] for o in p5["offerings"]}
    # 8 GPUs at the configured per-GPU prices (11.0 on-demand, 4.0 spot)
    assert prices == {"on-demand": 88.0, "spot": 32.0}


def test_pools_sharing_a_machine_type_must_agree(fleet_from: FleetFrom) -> None:
    def edit(raw: dict[str, Any]) -> None:
        local_karpenter(raw)
        raw["clusters"][0]["pools"][1]["mig_profile"] = "1g.10gb"

    fleet = fleet_from(edit)
    with pytest.raises(ValueError, match="one instance type per name"):
        kwok_instance_types(fleet, fleet.clusters[0])


def test_local_karpenter_pools_start_without_static_fake_nodes(fleet_from: FleetFrom) -> None:
    from localfleet.fakenodes import local_fake_pools

    def edit(raw: dict[str, Any]) -> None:
        local_karpenter(raw)
        raw["clusters"][0]["pools"][0]["autoscaler"] = "managed"

    fleet = fleet_from(edit)
    # the pool that chose `managed` keeps its static nodes; Karpenter makes the other's
    assert [p.name for p in local_fake_pools(fleet)] == ["h100-ondemand"]
