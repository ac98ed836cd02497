"""Rolling GPU driver upgrades with node validation (see README.md in this folder).

`run_upgrade_pass` runs one pass (lease → observe → plan → act); `upgrade_status` is the plan a
pass would make, for reporting; `clear_failure` is an operator clearing a failed node;
`plan_pass` is the pure planning step on a snapshot. `cli.add_parser` / `cli.run` are the
command line (`fleetplane controller upgrade ...`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller.lazy import lazy_exports

if TYPE_CHECKING:
    from controller.upgrade.plan import Plan, PoolReport, plan_pass
    from controller.upgrade.rollout import (
        PassResult,
        clear_failure,
        run_upgrade_pass,
        upgrade_status,
    )
    from controller.upgrade.settings import UpgradeSettings, upgrade_settings
    from controller.upgrade.steps import Step

# Imported on first use: the command line imports `controller.upgrade.cli`, and the package
# must not load the Kubernetes client with it (`fleetplane --help` stays light).
_HOMES = {
    "Plan": "plan",
    "PoolReport": "plan",
    "plan_pass": "plan",
    "PassResult": "rollout",
    "clear_failure": "rollout",
    "run_upgrade_pass": "rollout",
    "upgrade_status": "rollout",
    "UpgradeSettings": "settings",
    "upgrade_settings": "settings",
    "Step": "steps",
}

__getattr__ = lazy_exports(__name__, _HOMES)


__all__ = [
    "PassResult",
    "Plan",
    "PoolReport",
    "Step",
    "UpgradeSettings",
    "clear_failure",
    "plan_pass",
    "run_upgrade_pass",
    "upgrade_settings",
    "upgrade_status",
]
