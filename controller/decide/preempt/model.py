"""What a preemption plan is made of: victim candidates, the node options they make, a
gang's placements, and the plan of a pass."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from controller.decide.workloads import families
from controller.observe.model import Pod


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    pod: Pod
    priority: int
    team: str | None
    frees: dict[str, int]
    running_seconds: float
    seconds_since_checkpoint: float
    mates: tuple[Pod, ...] = ()
    """The other pods of the victim's gang, evicted with it (they free nothing here)."""
    mates_devices: int = 0

    @property
    def families(self) -> dict[str, int]:
        """Devices per family its team loses with it: its own and its gang mates'."""
        out: dict[str, int] = {}
        for pod in (self.pod, *self.mates):
            for fam, n in families(pod).items():
                out[fam] = out.get(fam, 0) + n
        return out

    @property
    def devices(self) -> int:
        return sum(self.frees.values()) + self.mates_devices

    @property
    def work_lost(self) -> float:
        return self.seconds_since_checkpoint * self.devices


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeOption:
    node: str
    need: dict[str, int]
    candidates: tuple[Candidate, ...]
    victims: tuple[Candidate, ...]

    @property
    def work_lost(self) -> float:
        return sum(v.work_lost for v in self.victims)


@dataclass(frozen=True, slots=True, kw_only=True)
class GangPlacement:
    """One pending pod of a gang, the node it is to run on and the victims that make room for
    it there (none when the node already has room, or once earlier placements' victims go)."""

    pod: Pod
    priority: int
    pending_seconds: float
    option: NodeOption


@dataclass(frozen=True, slots=True, kw_only=True)
class GangPlan:
    """Room for every still-unplaced pod of a pending gang, made at once: `placements` holds
    `min_member - running` pods, each on its node, with the whole victim gangs to evict."""

    namespace: str
    name: str
    min_member: int
    running: int
    placements: tuple[GangPlacement, ...]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def victims(self) -> list[tuple[GangPlacement, Candidate]]:
        """Every victim with the placement it makes room for, in placement order."""
        return [(p, v) for p in self.placements for v in p.option.victims]


Replan = Callable[[frozenset[str]], tuple["GangPlan | None", str]]
"""Plan the gang again on the same snapshot without the given victim uids (the policy refused
them): the new plan, or None and why no plan is left."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Preemption:
    preemptor: Pod
    priority: int
    team: str | None
    pending_seconds: float
    demand: dict[str, int]
    options: tuple[NodeOption, ...]
    """Nodes where victims can make room, best first; the first is the plan. Empty for a gang:
    its plan is `gang`."""
    gang: GangPlan | None = None
    replan: Replan | None = None

    def for_placement(self, placement: GangPlacement) -> Preemption:
        """The preemption as seen by one pod of the gang: the preemptor the policy is asked
        about and the Events name, for the victims chosen for that pod."""
        return Preemption(
            preemptor=placement.pod,
            priority=placement.priority,
            team=self.team,
            pending_seconds=placement.pending_seconds,
            demand=dict(placement.pod.demand),
            options=(placement.option,),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class UnservedGang:
    """A pending gang the planner tried to serve and could not make room for as a whole."""

    namespace: str
    name: str
    pods: tuple[Pod, ...]
    reason: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(kw_only=True)
class PreemptPlan:
    preemptions: list[Preemption] = field(default_factory=list)
    waiting: list[tuple[Pod, str]] = field(default_factory=list)
    unserved_gangs: list[UnservedGang] = field(default_factory=list)
    """Gangs left waiting because room for all their pods at once cannot be made (one entry in
    `waiting` too, under their first pod): nobody is evicted for them."""
