"""The per-node health remediation state machine: the label that holds a node's state, the
annotations that hold its timer and details, the node condition, the taint, the remediation
hook, and every transition the controller may make.

One label (`fleetplane.dev/health-state`) holds the state; `fleetplane.dev/health-since` the
epoch second the node entered it (timeouts survive a restart of the controller);
`fleetplane.dev/health-detail` compact JSON (`Detail`): the fault, the remedy asked for, the
attempt, whether the controller cordoned the node, what the fault has cost so far. No label
means healthy as far as the controller knows. The label and its annotations are read and
written by `controller.nodeflow` (`state`, `act`), the base this mode shares with driver
upgrades.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from controller.nodeflow import claims
from controller.nodeflow.state import NodeDetail, StateKeys

STATE_LABEL: Final = claims.HEALTH.label
SINCE_ANNOTATION: Final = "fleetplane.dev/health-since"
DETAIL_ANNOTATION: Final = "fleetplane.dev/health-detail"
KEYS: Final = StateKeys(label=STATE_LABEL, since=SINCE_ANNOTATION, detail=DETAIL_ANNOTATION)

# The remediation hook (docs/contracts.md): the controller writes the request, a cloud or DCIM
# integration performs it and writes the completion back with the same request id.
REQUEST_ANNOTATION: Final = "fleetplane.dev/remediation-request"
"""`gpu-reset` or `reboot`: what the node needs."""
REQUEST_ID_ANNOTATION: Final = "fleetplane.dev/remediation-request-id"
"""`<node>-<attempt>`: names this request; the completion must repeat it."""
DONE_ANNOTATION: Final = "fleetplane.dev/remediation-done"
"""Written by the integration: `<request id>` when done, `<request id>:failed` when it could not."""

CORDONED_ANNOTATION: Final = "fleetplane.dev/health-cordoned"
"""Written with the cordon itself (one patch): the health machine cordoned this node, so it
uncordons it at the end, even when a killed pass never wrote the state that says so."""

TAINT_KEY: Final = "fleetplane.dev/gpu-unhealthy"
"""NoSchedule taint on a quarantined node; its value is the fault's kind."""
CONDITION_TYPE: Final = "GpuHealthy"
"""Node condition written on quarantine (False, reason = the fault) and on return (True)."""

# On validator pods.
VALIDATOR_PREFIX: Final = "fleetplane-health"
ATTEMPT_LABEL: Final = "fleetplane.dev/remediation-attempt"

GPU_RESET: Final = "gpu-reset"
REBOOT: Final = "reboot"
REPLACE: Final = "replace"
REMEDIES: Final = (GPU_RESET, REBOOT, REPLACE)
"""In escalation order: a reset that did not help is followed by a reboot, a reboot by a
replacement."""

QUARANTINED: Final = "quarantined"
DRAINING: Final = "draining"
REMEDIATING: Final = "remediating"
VALIDATING: Final = "validating"
NEEDS_REPLACEMENT: Final = "needs-replacement"
HOT: Final = "hot"

STATES: Final = (QUARANTINED, DRAINING, REMEDIATING, VALIDATING, NEEDS_REPLACEMENT, HOT)

OUT_OF_SERVICE: Final = frozenset(STATES)
"""Every state holds the node out of service and counts against `health.max_unavailable`."""

NEEDS_PODS: Final = frozenset({DRAINING, REMEDIATING, VALIDATING})
"""States whose handler reads the pods on the node."""

NONE: Final = None

TRANSITIONS: Final[dict[str | None, frozenset[str | None]]] = {
    NONE: frozenset({QUARANTINED, HOT, VALIDATING}),
    QUARANTINED: frozenset({DRAINING}),
    DRAINING: frozenset({REMEDIATING, NEEDS_REPLACEMENT}),
    REMEDIATING: frozenset({VALIDATING, REMEDIATING, NEEDS_REPLACEMENT}),
    VALIDATING: frozenset({NONE, REMEDIATING, NEEDS_REPLACEMENT}),
    NEEDS_REPLACEMENT: frozenset(),
    HOT: frozenset({NONE, QUARANTINED}),
}
"""Every transition a pass makes. `remediating -> remediating` is an escalation (a new request:
reset -> reboot). Leaving `needs-replacement` is a person's act: removing the label (after the
GPU or the node was replaced) sends the node through validation (`none -> validating`)."""

EVENT_REASONS: Final[dict[str | None, str]] = {
    QUARANTINED: "GpuQuarantined",
    DRAINING: "GpuDraining",
    REMEDIATING: "GpuRemediationRequested",
    VALIDATING: "GpuValidating",
    NEEDS_REPLACEMENT: "GpuNeedsReplacement",
    HOT: "GpuTooHot",
    NONE: "GpuBackInService",
}

WARNING_STATES: Final = frozenset({QUARANTINED, NEEDS_REPLACEMENT, HOT})


def allowed(current: str | None, following: str | None) -> bool:
    return following in TRANSITIONS.get(current, frozenset())


def next_remedy(remedy: str) -> str:
    """The remedy after `remedy` failed to help."""
    index = REMEDIES.index(remedy) if remedy in REMEDIES else len(REMEDIES) - 1
    return REMEDIES[min(index + 1, len(REMEDIES) - 1)]


@dataclass(frozen=True, kw_only=True)
class Detail(NodeDetail):
    """What `fleetplane.dev/health-detail` holds (compact JSON; unknown keys are dropped).

    fault: the classified fault that started it (kind, remedy, reason, gpus, source).
    remedy: the remedy in use (`gpu-reset`, `reboot`, `replace`); it only escalates.
    attempt: the request / validator attempt; it only grows, so names are never reused.
    cordoned: the controller cordoned the node (uncordoned at the end only then).
    started: epoch second the node left service for this fault.
    evicted: per evicted pod (`ns/name`): GPUs held and seconds of work since its checkpoint.
    history: the remedies tried, with their outcome.
    boot_id: the node's boot ID when the controller started a reboot (`recovery: act`): a
        different one reported afterwards means the node rebooted.
    paused: GPU Operator deploy labels set to false for a GPU reset -> the value each had
        before (None: absent), written back after the reset.
    """

    fault: dict[str, Any] | None = None
    remedy: str | None = None
    attempt: int = 0
    cordoned: bool = False
    started: int | None = None
    evicted: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    boot_id: str | None = None
    paused: dict[str, str | None] = field(default_factory=dict)

    EMPTY: ClassVar[tuple[Any, ...]] = (None, False, {}, [])

    @classmethod
    def _checked(cls, values: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(values.get("evicted", {}), dict):
            values.pop("evicted")
        if not isinstance(values.get("history", []), list):
            values.pop("history")
        if not isinstance(values.get("fault"), dict | None):
            values.pop("fault")
        if not isinstance(values.get("boot_id"), str | None):
            values.pop("boot_id")
        paused = values.get("paused", {})
        if not isinstance(paused, dict) or not all(
            isinstance(v, str | None) for v in paused.values()
        ):
            values.pop("paused")
        started = values.get("started")
        if started is not None and (not isinstance(started, int) or isinstance(started, bool)):
            values.pop("started")
        return values
