"""NVML health check of a node's GPUs, run by the validator pod before a node that had its GPU
driver upgraded takes work again.

`check_node(Expectations(...), node=...)` reads the node through NVML (`observe`), judges the
snapshot with pure functions (`judge`) and returns a `Verdict` whose JSON document the validator
prints and whose `exit_code` it exits with; `fleetplane health check --help` is the
command line. See controller/health/README.md for what each check reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller.lazy import lazy_exports

if TYPE_CHECKING:
    from controller.health.judge import Expectations, Problem
    from controller.health.verdict import (
        EXIT_HEALTHY,
        EXIT_UNAVAILABLE,
        EXIT_UNHEALTHY,
        Verdict,
        check_node,
    )
    from controller.health.xids import CRITICAL_XIDS

# Imported on first use: `fleetplane --help` imports `controller.health.cli` and must not load
# NVML's observer or the verdict with it.
_HOMES = {
    "Expectations": "judge",
    "Problem": "judge",
    "EXIT_HEALTHY": "verdict",
    "EXIT_UNAVAILABLE": "verdict",
    "EXIT_UNHEALTHY": "verdict",
    "Verdict": "verdict",
    "check_node": "verdict",
    "CRITICAL_XIDS": "xids",
}

__getattr__ = lazy_exports(__name__, _HOMES)


__all__ = [
    "CRITICAL_XIDS",
    "EXIT_HEALTHY",
    "EXIT_UNAVAILABLE",
    "EXIT_UNHEALTHY",
    "Expectations",
    "Problem",
    "Verdict",
    "check_node",
]
