"""NVML health check of a node's GPUs, run by the validator pod before a node that had its GPU
driver upgraded takes work again.

`check_node(Expectations(...), node=...)` reads the node through NVML (`observe`), judges the
snapshot with pure functions (`judge`) and returns a `Verdict` whose JSON document the validator
prints and whose `exit_code` it exits with; `fleetplane health check --help` is the
command line. See controller/health/README.md for what each check reads.
"""

from controller.health.judge import Expectations, Problem
from controller.health.verdict import (
    EXIT_HEALTHY,
    EXIT_UNAVAILABLE,
    EXIT_UNHEALTHY,
    Verdict,
    check_node,
)
from controller.health.xids import CRITICAL_XIDS

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
