"""The steps of GPU remediation: the health machine's own actions (a node condition, an
eviction that records the work it throws away; cordon, taint, the validator pod and the rest
are `controller.nodeflow.steps`), the step that carries them and the node's next state, and
what a handler decides with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

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
    "EndRemedy",
    "Evict",
    "Relabel",
    "StartRemedy",
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


@dataclass(frozen=True, kw_only=True)
class Relabel:
    """Set node labels (None removes one): the GPU Operator's deploy switches around a reset."""

    name: ClassVar[str] = "relabel"
    labels: dict[str, str | None]

    def describe(self, node: str) -> str:
        shown = ", ".join(f"{k}={'(removed)' if v is None else v}" for k, v in self.labels.items())
        return f"label node {node} {shown}"


@dataclass(frozen=True, kw_only=True)
class StartRemedy:
    """Create the privileged pod that carries out the remedy (`remedy_pods`)."""

    name: ClassVar[str] = "start-remedy"
    remedy: str
    manifest: dict[str, Any]

    @property
    def key(self) -> str:
        meta = self.manifest["metadata"]
        return f"{meta['namespace']}/{meta['name']}"

    def describe(self, node: str) -> str:
        container = self.manifest["spec"]["containers"][0]
        command = " ".join([*container["command"], *container["args"]])
        return f"create privileged pod {self.key} on {node} running `{command}` ({self.remedy})"


@dataclass(frozen=True, kw_only=True)
class EndRemedy:
    """Delete a finished (or stale) remedy pod."""

    name: ClassVar[str] = "end-remedy"
    pod: PodView

    def describe(self, node: str) -> str:
        return f"delete remedy pod {self.pod.key}"


Action = (
    Cordon
    | Uncordon
    | Taint
    | Untaint
    | Condition
    | Evict
    | CreateValidator
    | DeleteValidator
    | Relabel
    | StartRemedy
    | EndRemedy
)


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
    gpu_pods: int | None = None
    """Pods still using the node's GPUs as work, for OPA (a reset or reboot needs none)."""

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
            self.next_state
            or any(not isinstance(a, DeleteValidator | EndRemedy) for a in self.actions)
        )


@dataclass(frozen=True, kw_only=True)
class Context:
    settings: HealthSettings
    snapshot: HealthSnapshot
    now: float
