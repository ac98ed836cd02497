"""The cloud's node upgrades held to the fleet's rules: GKE's maintenance policy from the
fleet's windows and freezes, checked against the live cluster under Pulumi's mocks; node-pool
surge settings from the pools' max_unavailable."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi_gcp as gcp
import pytest

from components.cloud_upgrades import (
    GkeUpgradePolicy,
    GkeUpgradePolicyArgs,
    gke_maintenance_policy,
)
from components.platform import Platform, PlatformArgs
from fleet.config import ConfigError, FleetConfig, UpgradeConfig, check_fleet, parse_fleet
from tests.components.component_testkit import (
    Declare,
    minimal_raw_fleet,
    run_program,
)
from tests.components.test_node_pools import NODE_POOL, declare_pool, to_eks

FleetFrom = Callable[[Callable[[dict[str, Any]], None] | None], FleetConfig]
GET_CLUSTER = "gcp:container/getCluster:getCluster"
POLICY = "fleetplane:cloud:GkeUpgradePolicy"
WEEKEND_NIGHTS = [{"days": ["sat", "sun"], "start": "01:00", "end": "07:00"}]


def upgrade(**raw: Any) -> UpgradeConfig:
    return UpgradeConfig.model_validate(raw)


@pytest.mark.parametrize(
    ("windows", "start", "end", "recurrence"),
    [
        # the default: all of Saturday and Sunday; 23:59 is inclusive, so the window is 24 h
        (None, "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "FREQ=WEEKLY;BYDAY=SA,SU"),
        (WEEKEND_NIGHTS, "2026-01-01T01:00:00Z", "2026-01-01T07:01:00Z", "FREQ=WEEKLY;BYDAY=SA,SU"),
        # windows with the same times are one window; days in week order
        (
            [
                {"days": ["fri"], "start": "20:00", "end": "23:59"},
                {"days": ["tue", "mon"], "start": "20:00", "end": "23:59"},
            ],
            "2026-01-01T20:00:00Z",
            "2026-01-02T00:00:00Z",
            "FREQ=WEEKLY;BYDAY=MO,TU,FR",
        ),
    ],
)
def test_windows_become_one_weekly_recurring_window(
    windows: list[dict[str, Any]] | None, start: str, end: str, recurrence: str
) -> None:
    policy = gke_maintenance_policy(
        upgrade(**({"maintenance_windows": windows} if windows else {}))
    )
    assert (policy.start_time, policy.end_time, policy.recurrence) == (start, end, recurrence)
    assert policy.exclusions == ()


def test_windows_of_different_times_cannot_be_one_gke_window() -> None:
    with pytest.raises(ValueError, match=r"upgrade\.maintenance_windows"):
        gke_maintenance_policy(
            upgrade(
                maintenance_windows=[
                    {"days": ["sat"], "start": "01:00", "end": "07:00"},
                    {"days": ["sun"], "start": "02:00", "end": "08:00"},
                ]
            )
        )


def test_freezes_become_node_upgrade_exclusions_in_utc() -> None:
    policy = gke_maintenance_policy(
        upgrade(
            cloud_freezes=[
                {
                    "name": "year-end",
                    "start": "2026-12-20T00:00:00+01:00",
                    "end": "2027-01-04T00:00:00Z",
                }
            ]
        )
    )
    (exclusion,) = policy.exclusions
    assert exclusion.name == "year-end"
    assert exclusion.start_time == "2026-12-19T23:00:00Z"
    assert exclusion.end_time == "2027-01-04T00:00:00Z"
    assert exclusion.scope == "NO_MINOR_OR_NODE_UPGRADES"


def test_freezes_stay_out_of_the_data_document() -> None:
    """The controller's rollout keeps to the windows; freezes are the cloud's."""
    dumped = upgrade(
        cloud_freezes=[
            {"name": "f", "start": "2026-12-20T00:00:00Z", "end": "2027-01-04T00:00:00Z"}
        ]
    ).model_dump()
    assert "cloud_freezes" not in dumped
    assert "maintenance_windows" in dumped


def with_upgrade(**section: Any) -> Callable[[dict[str, Any]], None]:
    def edit(raw: dict[str, Any]) -> None:
        raw["upgrade"] = {**raw.get("upgrade", {}), **section}  # keeps the validator image

    return edit


@pytest.mark.parametrize(
    ("section", "path", "reason"),
    [
        (
            {
                "maintenance_windows": [
                    {"days": ["sat"], "start": "01:00", "end": "07:00"},
                    {"days": ["sun"], "start": "02:00", "end": "08:00"},
                ]
            },
            "upgrade.maintenance_windows",
            "a GKE cluster takes one recurring window, so every window must share start and end "
            "(here 01:00-07:00, 02:00-08:00)",
        ),
        (
            # 4 x 2 x 5 h = 40 h in the worst 32 days
            {"maintenance_windows": [{"days": ["sat", "sun"], "start": "01:00", "end": "05:59"}]},
            "upgrade.maintenance_windows",
            "less than 48 hours in any 32 days",
        ),
        (
            # 3 h stretches do not count, however many
            {
                "maintenance_windows": [
                    {"days": ["mon", "tue", "wed", "thu", "fri"], "end": "02:59"}
                ]
            },
            "upgrade.maintenance_windows",
            "counting only stretches of at least 4 hours",
        ),
        (
            {
                "cloud_freezes": [
                    {"name": "f", "start": "2026-12-20T00:00:00Z", "end": "2026-12-19T00:00:00Z"}
                ]
            },
            "upgrade.cloud_freezes[f].end",
            "must be after start",
        ),
        (
            {
                "cloud_freezes": [
                    {"name": "f", "start": "2026-12-20T00:00:00Z", "end": "2026-12-21T00:00:00Z"},
                    {"name": "f", "start": "2026-12-22T00:00:00Z", "end": "2026-12-23T00:00:00Z"},
                ]
            },
            "upgrade.cloud_freezes[f]",
            "duplicate freeze name",
        ),
    ],
)
def test_fleet_windows_gke_cannot_take_are_refused_by_field(
    section: dict[str, Any], path: str, reason: str
) -> None:
    raw = minimal_raw_fleet()
    with_upgrade(**section)(raw)
    with pytest.raises(ConfigError) as refused:
        parse_fleet(raw)
    assert any(p.path == path and reason in p.reason for p in refused.value.problems), str(
        refused.value
    )


def test_the_weekend_nights_of_prod_are_just_enough_for_gke(fleet_from: FleetFrom) -> None:
    # 4 Saturdays and 4 Sundays of 6 h (and a minute) in any 32 days: 48 h
    fleet = fleet_from(with_upgrade(maintenance_windows=WEEKEND_NIGHTS))
    assert check_fleet(fleet) == []


def test_a_fleet_without_gke_pools_may_keep_several_windows(fleet_from: FleetFrom) -> None:
    def edit(raw: dict[str, Any]) -> None:
        to_eks(raw)
        raw["upgrade"] = {
            **raw.get("upgrade", {}),
            "maintenance_windows": [
                {"days": ["sat"], "start": "01:00", "end": "02:00"},
                {"days": ["wed"], "start": "03:00", "end": "04:00"},
            ],
        }

    assert check_fleet(fleet_from(edit)) == []


def live_cluster(policy: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """What getCluster answers: the cluster's maintenance policy in the provider's shape."""
    return {GET_CLUSTER: {"maintenancePolicies": [policy] if policy else []}}


def declare_policy(fleet: FleetConfig, invokes: dict[str, dict[str, Any]]) -> Any:
    cluster = fleet.clusters[0]
    return run_program(
        lambda: GkeUpgradePolicy(
            f"{cluster.name}-upgrade-policy", GkeUpgradePolicyArgs(fleet=fleet, cluster=cluster)
        ),
        invokes,
    )


FREEZE = {"name": "year-end", "start": "2026-12-20T00:00:00Z", "end": "2027-01-04T00:00:00Z"}
MATCHING_WINDOW = {
    # another first day and BYDAY order: the same window
    "startTime": "2025-03-01T01:00:00Z",
    "endTime": "2025-03-01T07:01:00Z",
    "recurrence": "FREQ=WEEKLY;BYDAY=SU,SA",
}
MATCHING_EXCLUSION = {
    "exclusionName": "year-end",
    "startTime": "2026-12-20T00:00:00Z",
    "endTime": "2027-01-04T00:00:00Z",
    "exclusionOptions": [{"scope": "NO_MINOR_OR_NODE_UPGRADES"}],
}


@pytest.mark.parametrize(
    ("live", "warned"),
    [
        (
            {"recurringWindows": [MATCHING_WINDOW], "maintenanceExclusions": [MATCHING_EXCLUSION]},
            [],
        ),
        (None, ["no recurring maintenance window"]),
        (
            {
                "recurringWindows": [{**MATCHING_WINDOW, "recurrence": "FREQ=DAILY"}],
                "maintenanceExclusions": [MATCHING_EXCLUSION],
            },
            ["the recurring window is FREQ=DAILY from 01:00 UTC for 6:01:00"],
        ),
        (
            {
                "recurringWindows": [{**MATCHING_WINDOW, "endTime": "2025-03-01T09:00:00Z"}],
                "maintenanceExclusions": [MATCHING_EXCLUSION],
            },
            ["for 8:00:00, the fleet's is BYDAY=SA,SU;FREQ=WEEKLY from 01:00 UTC for 6:01:00"],
        ),
        (
            {
                "recurringWindows": [MATCHING_WINDOW],
                "maintenanceExclusions": [
                    {**MATCHING_EXCLUSION, "exclusionOptions": [{"scope": "NO_MINOR_UPGRADES"}]}
                ],
            },
            ["exclusion 'year-end'"],
        ),
        ({"recurringWindows": [MATCHING_WINDOW]}, ["exclusion 'year-end'"]),
    ],
    ids=["matches", "no-policy", "daily", "longer", "minor-only-scope", "no-exclusion"],
)
def test_the_live_clusters_policy_is_held_against_the_fleets(
    live: dict[str, Any] | None, warned: list[str], fleet_from: FleetFrom
) -> None:
    fleet = fleet_from(with_upgrade(maintenance_windows=WEEKEND_NIGHTS, cloud_freezes=[FREEZE]))
    declared = declare_policy(fleet, live_cluster(live))
    warnings = [m for m in declared.logs if "would upgrade GPU/TPU nodes" in m]
    if not warned:
        assert warnings == []
        return
    (warning,) = warnings
    for text in warned:
        assert text in warning
    # the warning says what to run
    assert (
        "gcloud container clusters update gke --location us-central1 --project acme "
        "--maintenance-window-start 2026-01-01T01:00:00Z "
        "--maintenance-window-end 2026-01-01T07:01:00Z "
        "--maintenance-window-recurrence 'FREQ=WEEKLY;BYDAY=SA,SU'"
    ) in warning
    assert (
        "--add-maintenance-exclusion-name year-end "
        "--add-maintenance-exclusion-start 2026-12-20T00:00:00Z "
        "--add-maintenance-exclusion-end 2027-01-04T00:00:00Z "
        "--add-maintenance-exclusion-scope no_minor_or_node_upgrades"
    ) in warning


def test_the_policy_declared_on_a_cluster_has_the_providers_shape(fleet_from: FleetFrom) -> None:
    """For a program that owns its GKE cluster: `args()` is the Cluster's maintenance_policy."""
    fleet = fleet_from(with_upgrade(maintenance_windows=WEEKEND_NIGHTS, cloud_freezes=[FREEZE]))
    policy = gke_maintenance_policy(fleet.upgrade)
    declared = run_program(
        lambda: gcp.container.Cluster(
            "gke",
            gcp.container.ClusterArgs(
                location="us-central1",
                release_channel=gcp.container.ClusterReleaseChannelArgs(channel="REGULAR"),
                maintenance_policy=policy.args(),
            ),
        )
    )
    got = declared.one("gcp:container/cluster:Cluster").inputs["maintenancePolicy"]
    assert got == {
        "recurringWindow": {
            "startTime": "2026-01-01T01:00:00Z",
            "endTime": "2026-01-01T07:01:00Z",
            "recurrence": "FREQ=WEEKLY;BYDAY=SA,SU",
        },
        "maintenanceExclusions": [
            {
                "exclusionName": "year-end",
                "startTime": "2026-12-20T00:00:00Z",
                "endTime": "2027-01-04T00:00:00Z",
                "exclusionOptions": {"scope": "NO_MINOR_OR_NODE_UPGRADES"},
            }
        ],
    }


@pytest.mark.parametrize(
    ("pool_name", "max_unavailable", "max_nodes", "nodes"),
    [
        ("h100", 1, 4, 1),
        ("h100", 3, 4, 3),
        ("h100", "25%", 4, 1),
        ("h100", "50%", 4, 2),
        ("h100", "10%", 32, 4),
        ("h100", "1%", 2, 1),
        ("tpu", 2, 2, 2),
        ("tpu", "50%", 2, 1),
    ],
)
def test_gke_pools_surge_by_their_max_unavailable(
    pool_name: str,
    max_unavailable: int | str,
    max_nodes: int,
    nodes: int,
    declare: Declare,
    fleet_from: FleetFrom,
) -> None:
    """A percentage is of the pool at its largest, rounded up as the controller rounds it; no
    surge node (accelerators are scarce)."""

    def edit(raw: dict[str, Any]) -> None:
        pool = next(p for p in raw["clusters"][0]["pools"] if p["name"] == pool_name)
        pool["max_unavailable"] = max_unavailable
        pool["max_nodes"] = max_nodes

    got = declare_pool(declare, fleet_from(edit), pool_name).one(NODE_POOL).inputs
    assert got["upgradeSettings"] == {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": nodes}
    assert got["management"] == {"autoRepair": True, "autoUpgrade": True}


def test_the_platform_holds_each_gke_cluster_to_the_windows(
    stack_fleets: dict[str, FleetConfig],
) -> None:
    """prod (GKE) gets the policy and its check; dev (EKS) and local get none."""
    for stack, count in (("prod", 1), ("dev", 0), ("local", 0)):
        fleet = stack_fleets[stack]
        declared = run_program(
            lambda fleet=fleet, stack=stack: Platform(stack, PlatformArgs(fleet=fleet))  # type: ignore[misc]
        )
        assert len(declared.of_type(POLICY)) == count, stack
        if count:
            assert any(
                "would upgrade GPU/TPU nodes outside the fleet's upgrade windows" in m
                for m in declared.logs
            )
