"""The per-node upgrade state machine: the label that holds a node's state, the annotations that
hold its timer and details, and every transition the controller may make.

One label (`fleetplane.dev/upgrade-state`) holds the state; `fleetplane.dev/upgrade-since` holds
the epoch second the node entered it (timeouts survive a restart of the controller), and
`fleetplane.dev/upgrade-detail` holds compact JSON (`Detail`): the target, the driver it came
from, whether the controller cordoned it, the driver pod it restarted, the validation attempt,
the last verdict and the failure, if any. The names follow the GPU Operator's upgrade library:
each state names what is required next. The label and its annotations are read and written
by `controller.nodeflow` (`state`, `act`), the base this mode shares with GPU remediation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from controller.nodeflow import claims
from controller.nodeflow.keys import (
    APP_NAME_LABEL as APP_NAME_LABEL,
)
from controller.nodeflow.keys import (
    VALIDATOR_APP as VALIDATOR_APP,
)
from controller.nodeflow.keys import (
    VALIDATOR_ATTEMPT_LABEL as VALIDATOR_ATTEMPT_LABEL,
)
from controller.nodeflow.keys import (
    VALIDATOR_NODE_ANNOTATION as VALIDATOR_NODE_ANNOTATION,
)
from controller.nodeflow.state import NodeDetail, StateKeys

STATE_LABEL: Final = claims.UPGRADE.label
SINCE_ANNOTATION: Final = "fleetplane.dev/upgrade-since"
DETAIL_ANNOTATION: Final = "fleetplane.dev/upgrade-detail"
KEYS: Final = StateKeys(label=STATE_LABEL, since=SINCE_ANNOTATION, detail=DETAIL_ANNOTATION)

UPGRADE_REQUIRED: Final = "upgrade-required"
CORDON_REQUIRED: Final = "cordon-required"
WAIT_FOR_JOBS_REQUIRED: Final = "wait-for-jobs-required"
DRAIN_REQUIRED: Final = "drain-required"
DRIVER_RESTART_REQUIRED: Final = "driver-restart-required"
VALIDATION_REQUIRED: Final = "validation-required"
UNCORDON_REQUIRED: Final = "uncordon-required"
UPGRADE_DONE: Final = "upgrade-done"
UPGRADE_FAILED: Final = "upgrade-failed"

STATES: Final = (
    UPGRADE_REQUIRED,
    CORDON_REQUIRED,
    WAIT_FOR_JOBS_REQUIRED,
    DRAIN_REQUIRED,
    DRIVER_RESTART_REQUIRED,
    VALIDATION_REQUIRED,
    UNCORDON_REQUIRED,
    UPGRADE_DONE,
    UPGRADE_FAILED,
)

IN_PROGRESS: Final = frozenset(
    {
        CORDON_REQUIRED,
        WAIT_FOR_JOBS_REQUIRED,
        DRAIN_REQUIRED,
        DRIVER_RESTART_REQUIRED,
        VALIDATION_REQUIRED,
        UNCORDON_REQUIRED,
    }
)
"""States of a node the rollout has taken out of service: each counts against `max_parallel`
and, like a failed node, as unavailable."""

BEFORE_DRIVER_RESTART: Final = frozenset(
    {CORDON_REQUIRED, WAIT_FOR_JOBS_REQUIRED, DRAIN_REQUIRED, DRIVER_RESTART_REQUIRED}
)
"""Still on the old driver: a halted pool returns these nodes to service."""

NEEDS_PODS: Final = frozenset(
    {
        WAIT_FOR_JOBS_REQUIRED,
        DRAIN_REQUIRED,
        DRIVER_RESTART_REQUIRED,
        VALIDATION_REQUIRED,
        UNCORDON_REQUIRED,
    }
)
"""States whose handler reads the pods on the node (listed per node in the snapshot)."""

NONE: Final = None
"""No state label: the node was never upgraded, or an operator removed the label."""

TRANSITIONS: Final[dict[str | None, frozenset[str]]] = {
    NONE: frozenset({UPGRADE_REQUIRED, CORDON_REQUIRED, VALIDATION_REQUIRED}),
    UPGRADE_REQUIRED: frozenset({CORDON_REQUIRED, UPGRADE_DONE}),
    CORDON_REQUIRED: frozenset({WAIT_FOR_JOBS_REQUIRED, UNCORDON_REQUIRED}),
    WAIT_FOR_JOBS_REQUIRED: frozenset({DRAIN_REQUIRED, UNCORDON_REQUIRED}),
    DRAIN_REQUIRED: frozenset({DRIVER_RESTART_REQUIRED, UNCORDON_REQUIRED}),
    DRIVER_RESTART_REQUIRED: frozenset({VALIDATION_REQUIRED, UNCORDON_REQUIRED}),
    VALIDATION_REQUIRED: frozenset({UNCORDON_REQUIRED, UPGRADE_FAILED}),
    UNCORDON_REQUIRED: frozenset({UPGRADE_DONE, UPGRADE_REQUIRED}),
    UPGRADE_DONE: frozenset({UPGRADE_REQUIRED}),
    UPGRADE_FAILED: frozenset({CORDON_REQUIRED, VALIDATION_REQUIRED}),
}
"""Every transition the controller makes. Leaving `upgrade-failed` is an operator's action
(`fleetplane controller upgrade clear NODE`); the pass itself never does it. From no label to
`cordon-required` / `validation-required` is the same clearing, done by removing the label."""

EVENT_REASONS: Final = {
    UPGRADE_REQUIRED: "DriverUpgradeRequired",
    CORDON_REQUIRED: "DriverUpgradeStarted",
    WAIT_FOR_JOBS_REQUIRED: "DriverUpgradeCordoned",
    DRAIN_REQUIRED: "DriverUpgradeDraining",
    DRIVER_RESTART_REQUIRED: "DriverUpgradeDrained",
    VALIDATION_REQUIRED: "DriverUpgradeDriverRestarted",
    UNCORDON_REQUIRED: "DriverUpgradeValidated",
    UPGRADE_DONE: "DriverUpgradeDone",
    UPGRADE_FAILED: "DriverUpgradeFailed",
}
"""Event reason recorded on the node when it enters a state."""


def allowed(current: str | None, following: str) -> bool:
    return following in TRANSITIONS.get(current, frozenset())


@dataclass(frozen=True, kw_only=True)
class Detail(NodeDetail):
    """What `fleetplane.dev/upgrade-detail` holds (compact JSON; unknown keys are dropped).

    target: driver version this upgrade rolls out. previous: the driver the node had.
    cordoned: the controller cordoned the node and uncordons it at the end (false when the node
        was already unschedulable for another reason, which is left as found).
    driver_pod: uid of the driver pod to restart, then of the one restarted.
    attempt: the validator attempt in use (the validator pod's name carries it); it only grows,
        across upgrades of the node too, so a validator pod name is never reused.
    verdict: summary of the last validator verdict. failure: why the node failed.
    cleared: the last failure an operator cleared (who, when, what).
    """

    target: str | None = None
    previous: str | None = None
    cordoned: bool = False
    driver_pod: str | None = None
    attempt: int = 0
    verdict: dict[str, Any] | None = None
    failure: dict[str, Any] | None = None
    cleared: dict[str, Any] | None = None
