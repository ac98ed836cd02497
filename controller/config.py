"""The controller's view of the rendered configuration document (docs/contracts.md).

The controller reads the same JSON document OPA serves as `data.fleetplane.config` (in the
cluster it is mounted from a ConfigMap). Its shape is fleet/contract, whose one decoder collects
every problem with its path instead of stopping at the first; this module is the pass's view of
it (teams, models and prices, workload types, budget ratios, the lifetime rules and its own
`controller` section). Command-line options override the `controller` section (`Settings`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from controller.errors import PermanentError
from fleet import contract


class ConfigProblems(PermanentError):
    """The document lacks something the controller needs; one `path: reason` per line."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid configuration:\n" + "\n".join(f"  {p}" for p in problems))
        self.problems = problems


IdleRule = contract.IdleRule
"""`workload_types.<type>.idle` (fleet/contract): below `util_threshold_percent` for
`window_seconds`, then warned, then reclaimable `grace_seconds` after the warning."""

LifetimeRules = contract.Lifetime
"""The `lifetime` section (fleet/contract, the defaults of fleet.config.LifetimeConfig): how
long work past its maximum runtime, orphaned work and stragglers are given."""


@dataclass(frozen=True, kw_only=True)
class WorkloadType:
    name: str
    preemptible: bool
    min_runtime_seconds: int
    idle: IdleRule | None
    default_max_runtime_seconds: int | None = None


@dataclass(frozen=True, kw_only=True)
class Model:
    name: str
    resource: str
    node_label: str
    label_value: str
    price_per_hour_usd: dict[str, float]


@dataclass(frozen=True, kw_only=True)
class Team:
    name: str
    namespaces: tuple[str, ...]
    monthly_budget_usd: float
    guaranteed: dict[str, int]
    quota: dict[str, int]


def owned_by_upgrade(path: str) -> bool:
    """Problems the driver upgrade reports (`upgrade_settings`), not every pass."""
    return path.split(".")[0].split("[")[0] in ("pools", "upgrade", "gpu_operator")


def owned_by_health(path: str) -> bool:
    """Problems the health remediation reports (`health_settings`), not every pass."""
    parts = path.split(".")
    return parts[0] == "health" or (parts[0] == "models" and parts[2:3] == ["thermal"])


@dataclass(frozen=True, kw_only=True)
class FleetView:
    """The controller's view of the decoded document (`document`, fleet/contract); `raw` is
    the document as read. `problems` are those of the sections only the upgrade and the health
    remediation read, which report them (`owned_by_upgrade`, `owned_by_health`)."""

    raw: dict[str, Any]
    document: contract.ConfigDocument
    problems: tuple[tuple[str, str], ...] = ()
    teams: dict[str, Team]
    namespaces: dict[str, str]
    models: dict[str, Model]
    workload_types: dict[str, WorkloadType]
    warn_ratio: float
    deny_ratio: float
    controller: contract.Controller
    lifetime: LifetimeRules = field(default_factory=LifetimeRules)
    system_namespaces: frozenset[str] = frozenset()

    def team_of(self, namespace: str) -> Team | None:
        name = self.namespaces.get(namespace)
        return self.teams.get(name) if name else None

    def model_of_node(self, labels: dict[str, str]) -> Model | None:
        for model in self.models.values():
            if labels.get(model.node_label) == model.label_value:
                return model
        return None

    def problems_of(self, owned: Callable[[str], bool]) -> list[str]:
        """`path: reason` of the document's problems that `owned(path)` accepts."""
        return [f"{path}: {reason}" for path, reason in self.problems if owned(path)]


def parse_config(raw: Any) -> FleetView:
    """A `FleetView` of a rendered document, or `ConfigProblems` listing every problem of the
    sections a pass reads (fleet/contract decodes; those of the upgrade and the health
    remediation are theirs to report)."""
    decoded = contract.decode_document(raw)
    deferred = [(p, r) for p, r in decoded.problems if owned_by_upgrade(p) or owned_by_health(p)]
    problems = [f"{p}: {r}" for p, r in decoded.problems if (p, r) not in deferred]
    if problems:
        raise ConfigProblems(problems)
    document = decoded.document
    return FleetView(
        raw=raw,
        document=document,
        problems=tuple(deferred),
        teams={
            name: Team(
                name=name,
                namespaces=team.namespaces,
                monthly_budget_usd=float(team.monthly_budget_usd),
                guaranteed=dict(team.guaranteed),
                quota=dict(team.quota),
            )
            for name, team in document.teams.items()
        },
        namespaces=dict(document.namespaces),
        models={
            name: Model(
                name=name,
                resource=model.resource,
                node_label=model.node_label,
                label_value=model.label_value,
                price_per_hour_usd={k: float(v) for k, v in model.price_per_hour_usd.items()},
            )
            for name, model in document.models.items()
        },
        workload_types={
            name: WorkloadType(
                name=name,
                preemptible=wt.preemptible,
                min_runtime_seconds=wt.min_runtime_seconds,
                idle=wt.idle,
                default_max_runtime_seconds=wt.default_max_runtime_seconds,
            )
            for name, wt in document.workload_types.items()
        },
        warn_ratio=float(document.budget.warn_ratio),
        deny_ratio=float(document.budget.deny_ratio),
        controller=document.controller,
        lifetime=document.lifetime,
        system_namespaces=frozenset(document.system_namespaces),
    )


def load_config(path: Path) -> FleetView:
    try:
        raw = orjson.loads(path.read_bytes())
    except OSError as error:
        raise ConfigProblems([f"{path}: cannot read: {error}"]) from error
    except orjson.JSONDecodeError as error:
        raise ConfigProblems([f"{path}: not JSON: {error}"]) from error
    return parse_config(raw)


@dataclass(frozen=True, kw_only=True)
class Settings:
    """How one pass runs. Defaults come from the config's `controller` section; the command
    line overrides them.

    prometheus_url, opa_url: where the metrics and the decisions are (no default of their own).
    opa_ca_file: CA bundle to verify an https OPA; None uses the system store. Default None.
    opa_token_file: the file holding the controller's bearer token for OPA (sent as
        `Authorization: Bearer`); None sends none (an OPA without authorization). Default None.
    opa_data_configmap: "namespace/name" of the ConfigMap where the controller keeps the
        documents OPA loads at start (the last spend it published); None keeps none. Default
        None.
    opa_service: "namespace/name" of the in-cluster OPA Service whose replicas each get the
        spend document (each keeps its own data); None publishes spend to opa_url alone.
        Default None; a `--opa-url` on the command line also means None.
    dry_run: decide, ask OPA, print and log every action, change nothing. Default false.
    lease_name, lease_namespace: the Lease that keeps two runs from overlapping.
    lease_seconds: how long a crashed run blocks the next one. Default the period (300).
    preemption_pending_seconds: a workload pending this long may preempt. Default 600.
    scrape_interval_seconds: DCGM scrape interval, for the samples expected in a window. Default 15.
    min_sample_coverage: share of the expected samples that makes evidence complete. Default 0.95.
    fb_steady_mib: framebuffer use that moves more than this in a window counts as activity.
        Default 256.
    eviction_grace_seconds: grace period given to a preempted pod to checkpoint; None keeps the
        pod's own terminationGracePeriodSeconds. Default None.
    request_timeout_seconds: per HTTP request. Default 10.
    query_timeout_seconds: per Prometheus evidence query, which aggregates every GPU's series
        over the idle window: at 40,000 GPUs one took 1-2 s alone and over 10 s with the others
        on a loaded 2-core machine (bench/controller_pass.py). Default 60.
    act_concurrency: independent actions (each on its own objects) carried out at once.
        Default 8; 1 acts strictly one after the other.
    pushgateway_url: where the pass's metrics are pushed at its end; None pushes nothing.
        Default the config's `controller.pushgateway_url`.
    """

    prometheus_url: str
    opa_url: str
    opa_ca_file: str | None = None
    opa_token_file: str | None = None
    opa_data_configmap: str | None = None
    opa_service: str | None = None
    dry_run: bool = False
    lease_name: str = "fleetplane-controller"
    lease_namespace: str = "fleetplane-system"
    lease_seconds: int = 300
    preemption_pending_seconds: int = 600
    scrape_interval_seconds: float = 15.0
    min_sample_coverage: float = 0.95
    fb_steady_mib: float = 256.0
    eviction_grace_seconds: int | None = None
    request_timeout_seconds: float = 10.0
    query_timeout_seconds: float = 60.0
    act_concurrency: int = 8
    pushgateway_url: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, fleet: FleetView, **overrides: Any) -> Settings:
        section = fleet.controller
        values: dict[str, Any] = {
            "prometheus_url": section.prometheus_url,
            "opa_url": section.opa_url,
            "opa_ca_file": section.opa_ca_file,
            "opa_token_file": section.opa_token_file or None,
            "opa_data_configmap": section.opa_data_configmap or None,
            "dry_run": section.dry_run,
            "lease_name": section.lease_name or "fleetplane-controller",
            "lease_namespace": section.namespace or "fleetplane-system",
            "lease_seconds": int(section.period_seconds or 300),
            "preemption_pending_seconds": section.preemption_pending_seconds,
            "pushgateway_url": section.pushgateway_url or None,
        }
        if section.query_timeout_seconds:
            values["query_timeout_seconds"] = float(section.query_timeout_seconds)
        if section.scrape_interval_seconds:
            values["scrape_interval_seconds"] = float(section.scrape_interval_seconds)
        given = {k: v for k, v in overrides.items() if v is not None}
        values.update(given)
        if "opa_url" not in given and section.opa_service:
            values["opa_service"] = section.opa_service
        problems = [
            f"controller.{key}: required (or --{key.replace('_', '-')})"
            for key in ("prometheus_url", "opa_url")
            if not values.get(key)
        ]
        if problems:
            raise ConfigProblems(problems)
        return cls(**values, overrides=given)


def period_seconds(fleet: FleetView, settings: Settings) -> float:
    """Seconds between two passes: `controller.period_seconds`, or else the Lease's duration
    (which defaults to it)."""
    return float(fleet.controller.period_seconds or settings.lease_seconds)
