"""NVML health check of a node's GPUs, run by the validator pod before a node that had its GPU
driver upgraded takes work again.

`check_node(Expectations(...), node=...)` reads the node through NVML (`observe`), judges the
snapshot with pure functions (`judge`) and returns a `Verdict` whose JSON document the validator
prints and whose `exit_code` it exits with; `fleetplane health check --help` is the
command line. See controller/health/README.md for what each check reads.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


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
