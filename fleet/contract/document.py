"""`data.fleetplane.config` as one typed value: the sections in the order the document is
rendered, `encode_document` to write it and `decode_document` to read it back with every
problem (docs/contracts.md). Nothing here imports pydantic or Pulumi: the controller uses it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fleet.contract.codec import Problems, decode, encode, rules
from fleet.contract.fleet_sections import (
    Approval,
    Budget,
    Model,
    Platform,
    Pool,
    Team,
    WorkloadType,
)
from fleet.contract.operations import Controller, GpuOperator, Health, Lifetime, Upgrade


@dataclass(frozen=True, kw_only=True)
class ConfigDocument:
    """The whole document. `namespaces`, `teams`, `models`, `workload_types` and `budget` are
    required of a document; every other section may be absent (a document rendered before it
    existed) and then takes its defaults."""

    namespaces: dict[str, str] = field(default_factory=dict, metadata=rules(required=True))
    """Namespace -> the team owning it."""
    teams: dict[str, Team] = field(default_factory=dict, metadata=rules(required=True))
    models: dict[str, Model] = field(default_factory=dict, metadata=rules(required=True))
    workload_types: dict[str, WorkloadType] = field(
        default_factory=dict, metadata=rules(required=True)
    )
    approval: Approval = field(default_factory=Approval)
    registries: tuple[str, ...] = field(default=())
    """Image registry prefixes accelerator workloads may pull from."""
    platform_repositories: tuple[str, ...] = field(default=())
    """Repositories of the platform's own images, admitted only by digest."""
    budget: Budget = field(default_factory=Budget, metadata=rules(required=True))
    pools: dict[str, Pool] = field(default_factory=dict)
    reserved_pools: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Pools reserved for some teams -> those teams (what the gate's fast path walks)."""
    upgrade: Upgrade = field(default_factory=Upgrade)
    health: Health = field(default_factory=Health)
    lifetime: Lifetime = field(default_factory=Lifetime)
    gpu_operator: GpuOperator = field(default_factory=GpuOperator)
    system_namespaces: tuple[str, ...] = field(default=())
    """The platform's own namespaces: the gate judges nothing there."""
    platform: Platform = field(default_factory=Platform)
    controller: Controller = field(default_factory=Controller)


@dataclass(frozen=True, kw_only=True)
class Decoded:
    """A decoded document and every problem found in it, each (path, reason)."""

    document: ConfigDocument
    problems: tuple[tuple[str, str], ...]

    def lines(self, owned: Any = None) -> list[str]:
        """`path: reason` of the problems, or of those whose path `owned(path)` accepts."""
        return [f"{p}: {r}" for p, r in self.problems if owned is None or owned(p)]


def decode_document(raw: Any) -> Decoded:
    """The document from its JSON value; `problems` lists everything wrong with it, and the
    default stands in for each bad value."""
    problems = Problems()
    document = decode(ConfigDocument, raw, "", problems)
    for namespace, team in document.namespaces.items():
        if team not in document.teams:
            problems.add(f"namespaces.{namespace}", f"unknown team {team!r}")
    return Decoded(document=document, problems=tuple(problems.items))


def encode_document(document: ConfigDocument) -> dict[str, Any]:
    """The JSON value of the document, keys in the rendered order."""
    value: dict[str, Any] = encode(document)
    return value
