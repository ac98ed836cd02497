"""Rolling GPU driver upgrades with node validation (see README.md in this folder).

`run_upgrade_pass` runs one pass (lease → observe → plan → act); `upgrade_status` is the plan a
pass would make, for reporting; `clear_failure` is an operator clearing a failed node;
`plan_pass` is the pure planning step on a snapshot. `cli.add_parser` / `cli.run` are the
command line (`fleetplane controller upgrade ...`).
"""

from controller.upgrade.plan import Plan, PoolReport, plan_pass
from controller.upgrade.rollout import (
    PassResult,
    clear_failure,
    run_upgrade_pass,
    upgrade_status,
)
from controller.upgrade.settings import UpgradeSettings, upgrade_settings
from controller.upgrade.steps import Step

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
