"""What one pass reads (the snapshot and the configuration) and what its earlier preemptions
already took or reserved."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from controller.config import FleetView
from controller.decide.preempt.model import NodeOption
from controller.decide.workloads import families
from controller.observe.model import DisruptionBudget, Node, Pod


@dataclass(kw_only=True)
class Ledger:
    """What earlier preemptions of this pass already took or reserved."""

    free: dict[str, dict[str, int]]
    usage: dict[str, dict[str, int]]
    freeing: frozenset[str] = frozenset()
    evicted: set[str] = field(default_factory=set)
    gangs: dict[tuple[str, str], list[Pod]] = field(default_factory=dict)
    refused: frozenset[str] = frozenset()
    """Victims the policy refused when acting on a gang's plan: planned again without them."""
    disruptions: dict[tuple[str, str], int] = field(default_factory=dict)
    """Evictions already planned under each PodDisruptionBudget (namespace, name)."""

    def copy(self) -> Ledger:
        return replace(
            self,
            free={node: dict(left) for node, left in self.free.items()},
            usage={team: dict(held) for team, held in self.usage.items()},
            evicted=set(self.evicted),
            disruptions=dict(self.disruptions),
        )

    def commit(self, option: NodeOption, pod: Pod, pdbs: list[DisruptionBudget]) -> None:
        """Count the option's victims (with their gangs) as gone and the pod as placed."""
        for victim in option.victims:
            for gone in (victim.pod, *victim.mates):
                self.evicted.add(gone.uid)
                if gone.node_name in self.free:
                    left = self.free[gone.node_name]
                    for r, n in gone.demand.items():
                        left[r] = left.get(r, 0) + n
                team = victim.team
                if team:
                    held = self.usage.setdefault(team, {})
                    for fam, n in families(gone).items():
                        held[fam] = held.get(fam, 0) - n
                for budget in pdbs:
                    if budget.selects(gone):
                        key = (budget.namespace, budget.name)
                        self.disruptions[key] = self.disruptions.get(key, 0) + 1
        left = self.free[option.node]
        for r, n in pod.demand.items():
            left[r] = left.get(r, 0) - n


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """What every planning step of one pass reads: the snapshot and the configuration."""

    nodes: dict[str, Node]
    by_node: dict[str, list[Pod]]
    pdbs: list[DisruptionBudget]
    fleet: FleetView
    priority_of: Any
    now: float
