"""The steps of a driver upgrade: the idempotent side effects a handler asks for (cordon,
evict, restart the driver, create or delete the validator pod, uncordon; the common ones are
`controller.nodeflow.steps`), the admission of a node into the rollout, and the step that
carries them and the node's next state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from controller.nodeflow.pods import PodView
from controller.nodeflow.steps import Cordon as Cordon
from controller.nodeflow.steps import CreateValidator as CreateValidator
from controller.nodeflow.steps import DeleteValidator as DeleteValidator
from controller.nodeflow.steps import Uncordon as Uncordon
from controller.upgrade.observe import NodeView
from controller.upgrade.states import Detail


@dataclass(frozen=True, kw_only=True)
class Evict:
    name: ClassVar[str] = "evict"
    pod: PodView
    why: str
    budget: str | None = None
    """A PodDisruptionBudget that allowed no disruption in the snapshot (the eviction is still
    tried: the API server has the current count)."""

    def describe(self, node: str) -> str:
        return f"evict pod {self.pod.key} from {node} ({self.why})"


@dataclass(frozen=True, kw_only=True)
class RestartDriver:
    name: ClassVar[str] = "restart-driver"
    pod: PodView

    def describe(self, node: str) -> str:
        return f"delete driver pod {self.pod.key} on {node} (uid {self.pod.uid})"


Action = Cordon | Uncordon | Evict | RestartDriver | CreateValidator | DeleteValidator


@dataclass(frozen=True, kw_only=True)
class Admission:
    """The numbers OPA's upgrade decision is asked with. `pool_unavailable` counts the pool's
    unavailable nodes other than this one, including those admitted earlier in this pass."""

    pool_nodes: int
    pool_unavailable: int
    together: tuple[str, ...] = ()
    """The nodes admitted with this one because they run pods of the same gangs: all of them
    or none (act asks OPA for each before admitting any); empty for a node admitted alone."""


@dataclass(frozen=True, kw_only=True)
class Step:
    """One node's move in a pass: `actions` first (each idempotent), then `next_state` with
    `detail` and a fresh timer, or only `detail` when the node stays where it is."""

    node: NodeView
    target: str
    reason: str
    next_state: str | None = None
    actions: tuple[Action, ...] = ()
    detail: Detail | None = None
    admission: Admission | None = None
    failure: bool = False
    stamp: bool = False
    """Write the timer annotation although the state does not change (it was missing)."""

    @property
    def acts(self) -> bool:
        return bool(self.next_state or self.actions or self.detail is not None or self.stamp)

    @property
    def state(self) -> str | None:
        return self.node.state
