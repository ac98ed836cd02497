"""The upgrade's view of the decoded configuration (fleet/contract, docs/contracts.md).

Targets come from `pools.<pool>.driver_version` (pools whose driver the GPU Operator installs;
a pool without a driver version is not rolled), limits from `pools.<pool>.max_unavailable` and
`upgrade.max_parallel`, windows from `upgrade.maintenance_windows`. The remaining settings are
optional keys of the `upgrade` section with the defaults documented on `UpgradeSettings`.
The decoder checks every value's type and range; `upgrade_settings` adds what only the upgrade
knows (windows, the selector) and reports every problem with its path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.config import ConfigProblems, FleetView, owned_by_upgrade
from controller.nodeflow.settings import WorkflowSettings, workflow_values
from controller.upgrade.limits import Window, parse_window, resolve_max_unavailable
from fleet.contract.codec import encode


@dataclass(frozen=True, kw_only=True)
class PoolTarget:
    """A pool the controller rolls: its driver version and `max_unavailable` as configured
    (an integer, a digit string or "N%")."""

    name: str
    driver_version: str
    max_unavailable: int | str

    def limit(self, pool_nodes: int) -> int:
        resolved = resolve_max_unavailable(self.max_unavailable, pool_nodes)
        assert resolved is not None  # validated by upgrade_settings
        return resolved


@dataclass(frozen=True, kw_only=True)
class UpgradeSettings(WorkflowSettings):
    """How driver upgrades are rolled.

    pools: the pools with a target driver (required; from `pools`).
    windows: when a node may start an upgrade (required; `upgrade.maintenance_windows`). Nodes
        already in the rollout finish outside the windows.
    max_parallel: nodes of a pool in the rollout at once, before `max_unavailable`
        (`upgrade.max_parallel`). Default 1.
    wait_for_jobs_timeout_seconds: how long GPU jobs on a cordoned node may run before they are
        evicted (`upgrade.wait_for_jobs_timeout_seconds`, else `upgrade.drain_timeout_seconds`).
        Default 1800.
    checkpoint_max_age_seconds: a pod whose `fleetplane.dev/last-checkpoint` is at most this old
        is evicted without waiting for the timeout. Default 900.
    The validator pod's and the driver pods' settings are the node workflows' own
    (`controller.nodeflow.settings.WorkflowSettings`); for the upgrade, validation_timeout_seconds
    also bounds, from the driver restart, the new driver pod, the driver labels and the node's
    allocatable GPUs before the node is marked failed.
    """

    pools: dict[str, PoolTarget]
    windows: tuple[Window, ...]
    max_parallel: int = 1
    wait_for_jobs_timeout_seconds: int = 1800
    checkpoint_max_age_seconds: int = 900


def upgrade_settings(fleet: FleetView, **overrides: Any) -> UpgradeSettings:
    """`UpgradeSettings` from the decoded document; `overrides` (keyword = field name) win.
    Raises `ConfigProblems` listing every problem: the decoder's in `pools`, `upgrade` and
    `gpu_operator`, and those of the windows and the selector."""
    document = fleet.document
    problems = fleet.problems_of(owned_by_upgrade)
    pools: dict[str, PoolTarget] = {}
    for name, pool in document.pools.items():
        if not pool.driver_version or pool.driver_manager == "cloud":
            continue  # the driver comes with the node image: nothing to roll
        if resolve_max_unavailable(pool.max_unavailable, 1) is None:
            continue  # reported by the decoder
        pools[name] = PoolTarget(
            name=name, driver_version=pool.driver_version, max_unavailable=pool.max_unavailable
        )

    section = document.upgrade
    windows: list[Window] = []
    if section.maintenance_windows is None:
        if not any(p.startswith("upgrade.maintenance_windows") for p in problems):
            problems.append("upgrade.maintenance_windows: must be a list")
    else:
        for i, item in enumerate(section.maintenance_windows):
            window = parse_window(encode(item), f"upgrade.maintenance_windows[{i}]", problems)
            if window is not None:
                windows.append(window)

    values: dict[str, Any] = {
        "max_parallel": section.max_parallel,
        "wait_for_jobs_timeout_seconds": section.drain_timeout_seconds
        if section.wait_for_jobs_timeout_seconds is None
        else section.wait_for_jobs_timeout_seconds,
        "checkpoint_max_age_seconds": section.checkpoint_max_age_seconds,
        **workflow_values(fleet, problems),
    }
    if problems:
        raise ConfigProblems(problems)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return UpgradeSettings(pools=pools, windows=tuple(windows), **values)
