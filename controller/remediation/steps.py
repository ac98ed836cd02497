"""The steps of GPU remediation: the health machine's own actions (a node condition, an
eviction that records the work it throws away; cordon, taint, the validator pod and the rest
are `controller.nodeflow.steps`), the step that carries them and the node's next state, and
what a handler decides with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from controller.nodeflow.pods import PodView
from controller.nodeflow.steps import (
    Cordon,
    CreateValidator,
    DeleteValidator,
    Taint,
    Uncordon,
    Untaint,
)
from controller.remediation import states
from controller.remediation.classify import Fault
from controller.remediation.observe import HealthNode, HealthSnapshot
from controller.remediation.settings import HealthSettings
from controller.remediation.states import Detail

__all__ = [
    "RETURN",
    "Action",
    "Condition",
    "Context",
    "Cordon",
    "CreateValidator",
    "DeleteValidator",
    "Evict",
    "Step",
    "Taint",
    "Uncordon",
    "Untaint",
]

RETURN = "<none>"
"""`Step.next_state` for "back in service": the state label is removed."""


@dataclass(frozen=True, kw_only=True)
class Condition:
    name: ClassVar[str] = "condition"
    healthy: bool
    reason: str
    message: str

    def describe(self, node: str) -> str:
        return f"set condition {states.CONDITION_TYPE}={self.healthy} ({self.reason}) on {node}"


@dataclass(frozen=True, kw_only=True)
class Evict:
    name: ClassVar[str] = "evict"
    pod: PodView
    why: str
    lost_seconds: float
    """Work since the pod's last checkpoint (or its start) that the eviction throws away."""

    def describe(self, node: str) -> str:
        return f"evict pod {self.pod.key} ({self.why})"


Action = Cordon | Uncordon | Taint | Untaint | Condition | Evict | CreateValidator | DeleteValidator


@dataclass(frozen=True, kw_only=True)
class Step:
    """One node's move: OPA is asked `decision` (the action's name) first, then `actions` run
    (each idempotent), then `next_state` is written with `detail`, `request` (the remediation
    hook's annotations; {} removes them) and a fresh timer; or only `detail` when the node
    stays."""

    node: HealthNode
    reason: str
    decision: str
    next_state: str | None = None
    actions: tuple[Action, ...] = ()
    detail: Detail | None = None
    request: dict[str, str] | None = None
    fault: Fault | None = None
    pool_nodes: int = 0
    pool_out: int = 0
    stamp: bool = False

    @property
    def state(self) -> str | None:
        return self.node.state

    @property
    def acts(self) -> bool:
        return bool(self.next_state or self.actions or self.detail is not None or self.stamp)

    @property
    def asks(self) -> bool:
        """Whether OPA is asked: every step that changes the node or its pods."""
        return bool(
            self.next_state or any(not isinstance(a, DeleteValidator) for a in self.actions)
        )


@dataclass(frozen=True, kw_only=True)
class Context:
    settings: HealthSettings
    snapshot: HealthSnapshot
    now: float
