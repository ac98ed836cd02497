"""The validator pod and its verdict: now `controller.nodeflow.validator`, shared by every node
workflow; the names the upgrade's command and tests use stay importable from here."""

from __future__ import annotations

from controller.nodeflow.validator import (
    CONTAINER,
    HEALTHY,
    MESSAGE_LIMIT,
    UNAVAILABLE,
    UNHEALTHY,
    Outcome,
    health_args,
    read_verdict,
    run_validation,
    termination_message,
    validator_name,
    validator_pod,
)

__all__ = [
    "CONTAINER",
    "HEALTHY",
    "MESSAGE_LIMIT",
    "UNAVAILABLE",
    "UNHEALTHY",
    "Outcome",
    "health_args",
    "read_verdict",
    "run_validation",
    "termination_message",
    "validator_name",
    "validator_pod",
]
