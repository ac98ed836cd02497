"""The controller's view of the rendered configuration document (docs/contracts.md).

The controller reads the same JSON document OPA serves as `data.fleetplane.config` (in the
cluster it is mounted from a ConfigMap): teams, models and prices, workload types with their idle
rules, the budget ratios, and its own `controller` section. `load_config` validates what the
controller relies on and collects every problem with its path instead of stopping at the first.
Command-line options override the `controller` section (`Settings`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from controller.errors import PermanentError
from fleet.problems import grace_longer_than_window


class ConfigProblems(PermanentError):
    """The document lacks something the controller needs; one `path: reason` per line."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid configuration:\n" + "\n".join(f"  {p}" for p in problems))
        self.problems = problems


@dataclass(frozen=True, kw_only=True)
class IdleRule:
    """`workload_types.<type>.idle`: below `util_threshold_percent` for `window_seconds`, then
    warned, then reclaimable `grace_seconds` after the warning."""

    util_threshold_percent: float
    window_seconds: int
    grace_seconds: int


@dataclass(frozen=True, kw_only=True)
class WorkloadType:
    name: str
    preemptible: bool
    min_runtime_seconds: int
    idle: IdleRule | None


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


@dataclass(frozen=True, kw_only=True)
class LifetimeRules:
    """The `lifetime` section (fleet.config.LifetimeConfig, the same defaults): how long work
    past its maximum runtime, orphaned work and stragglers are given."""

    stop_grace_seconds: int = 1800
    checkpoint_window_seconds: int = 3600
    checkpoint_slack_seconds: int = 300
    orphan_grace_seconds: int = 300
    straggler_window_seconds: int = 1800
    straggler_util_percent: float = 5.0
    busy_util_percent: float = 50.0


def _lifetime(raw: Any, problems: list[str]) -> LifetimeRules:
    """The `lifetime` section; absent means the defaults (a document rendered before it)."""
    if raw is None:
        return LifetimeRules()
    if not isinstance(raw, dict):
        problems.append("lifetime: must be an object")
        return LifetimeRules()
    values: dict[str, Any] = {}
    for key in (
        "stop_grace_seconds",
        "checkpoint_window_seconds",
        "checkpoint_slack_seconds",
        "orphan_grace_seconds",
        "straggler_window_seconds",
    ):
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            problems.append(f"lifetime.{key}: must be a non-negative integer")
        else:
            values[key] = value
    for key in ("straggler_util_percent", "busy_util_percent"):
        value = raw.get(key)
        if value is None:
            continue
        if not _number(value) or not 0 <= value <= 100:
            problems.append(f"lifetime.{key}: must be a number from 0 to 100")
        else:
            values[key] = float(value)
    if values.get("checkpoint_window_seconds") == 0:
        problems.append("lifetime.checkpoint_window_seconds: must be positive")
    return LifetimeRules(**values)


@dataclass(frozen=True, kw_only=True)
class FleetView:
    """The parts of the rendered document the controller uses; `raw` is the whole document."""

    raw: dict[str, Any]
    teams: dict[str, Team]
    namespaces: dict[str, str]
    models: dict[str, Model]
    workload_types: dict[str, WorkloadType]
    warn_ratio: float
    deny_ratio: float
    controller: dict[str, Any]
    lifetime: LifetimeRules = field(default_factory=LifetimeRules)

    def team_of(self, namespace: str) -> Team | None:
        name = self.namespaces.get(namespace)
        return self.teams.get(name) if name else None

    def model_of_node(self, labels: dict[str, str]) -> Model | None:
        for model in self.models.values():
            if labels.get(model.node_label) == model.label_value:
                return model
        return None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def parse_config(raw: Any) -> FleetView:
    """A `FleetView` of a rendered document, or `ConfigProblems` listing every problem."""
    problems: list[str] = []
    if not isinstance(raw, dict):
        raise ConfigProblems(["<document>: must be a JSON object"])

    def section(name: str) -> dict[str, Any]:
        value = raw.get(name)
        if not isinstance(value, dict):
            problems.append(f"{name}: must be an object")
            return {}
        return value

    workload_types: dict[str, WorkloadType] = {}
    for name, wt in section("workload_types").items():
        at = f"workload_types.{name}"
        if not isinstance(wt, dict):
            problems.append(f"{at}: must be an object")
            continue
        idle_raw = wt.get("idle")
        idle: IdleRule | None = None
        if isinstance(idle_raw, dict):
            for key in ("util_threshold_percent", "window_seconds", "grace_seconds"):
                if not _number(idle_raw.get(key)) or idle_raw[key] < 0:
                    problems.append(f"{at}.idle.{key}: must be a non-negative number")
            if not any(p.startswith(f"{at}.idle.") for p in problems):
                if idle_raw["window_seconds"] <= 0:
                    problems.append(f"{at}.idle.window_seconds: must be positive")
                elif idle_raw["grace_seconds"] > idle_raw["window_seconds"]:
                    problems.append(
                        f"{at}.idle.grace_seconds: "
                        + grace_longer_than_window(
                            idle_raw["grace_seconds"], idle_raw["window_seconds"]
                        )
                    )
                else:
                    idle = IdleRule(
                        util_threshold_percent=float(idle_raw["util_threshold_percent"]),
                        window_seconds=int(idle_raw["window_seconds"]),
                        grace_seconds=int(idle_raw["grace_seconds"]),
                    )
        elif idle_raw is not None:
            problems.append(f"{at}.idle: must be an object or null")
        min_runtime = wt.get("min_runtime_seconds", 0)
        if not _number(min_runtime):
            problems.append(f"{at}.min_runtime_seconds: must be a number")
            min_runtime = 0
        workload_types[name] = WorkloadType(
            name=name,
            preemptible=wt.get("preemptible") is True,
            min_runtime_seconds=int(min_runtime),
            idle=idle,
        )

    models: dict[str, Model] = {}
    for name, model in section("models").items():
        at = f"models.{name}"
        prices = model.get("price_per_hour_usd") if isinstance(model, dict) else None
        if not isinstance(prices, dict) or not all(_number(p) for p in prices.values()):
            problems.append(f"{at}.price_per_hour_usd: must map capacity type to a number")
            continue
        missing = [k for k in ("resource", "node_label", "label_value") if not model.get(k)]
        for key in missing:
            problems.append(f"{at}.{key}: required")
        if missing:
            continue
        models[name] = Model(
            name=name,
            resource=model["resource"],
            node_label=model["node_label"],
            label_value=model["label_value"],
            price_per_hour_usd={k: float(v) for k, v in prices.items()},
        )

    teams: dict[str, Team] = {}
    for name, team in section("teams").items():
        at = f"teams.{name}"
        if not isinstance(team, dict):
            problems.append(f"{at}: must be an object")
            continue
        budget = team.get("monthly_budget_usd")
        if not _number(budget):
            problems.append(f"{at}.monthly_budget_usd: must be a number")
            budget = 0.0
        teams[name] = Team(
            name=name,
            namespaces=tuple(team.get("namespaces") or ()),
            monthly_budget_usd=float(budget or 0.0),
            guaranteed={k: int(v) for k, v in (team.get("guaranteed") or {}).items()},
            quota={k: int(v) for k, v in (team.get("quota") or {}).items()},
        )

    namespaces = section("namespaces")
    for ns, team_name in namespaces.items():
        if team_name not in teams:
            problems.append(f"namespaces.{ns}: unknown team {team_name!r}")

    budget = section("budget")
    ratios = {}
    for key, default in (("warn_ratio", 0.8), ("deny_ratio", 1.0)):
        value = budget.get(key, default)
        if not _number(value) or value <= 0:
            problems.append(f"budget.{key}: must be a positive number")
            value = default
        ratios[key] = float(value)

    controller = raw.get("controller") or {}
    if not isinstance(controller, dict):
        problems.append("controller: must be an object")
        controller = {}

    lifetime = _lifetime(raw.get("lifetime"), problems)

    if problems:
        raise ConfigProblems(problems)
    return FleetView(
        raw=raw,
        teams=teams,
        namespaces=dict(namespaces),
        models=models,
        workload_types=workload_types,
        warn_ratio=ratios["warn_ratio"],
        deny_ratio=ratios["deny_ratio"],
        controller=controller,
        lifetime=lifetime,
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
            "prometheus_url": section.get("prometheus_url"),
            "opa_url": section.get("opa_url"),
            "opa_ca_file": section.get("opa_ca_file"),
            "opa_token_file": section.get("opa_token_file") or None,
            "opa_data_configmap": section.get("opa_data_configmap") or None,
            "dry_run": bool(section.get("dry_run", False)),
            "lease_name": section.get("lease_name") or "fleetplane-controller",
            "lease_namespace": section.get("namespace") or "fleetplane-system",
            "lease_seconds": int(section.get("period_seconds") or 300),
            "preemption_pending_seconds": int(section.get("preemption_pending_seconds", 600)),
            "pushgateway_url": section.get("pushgateway_url") or None,
        }
        if section.get("query_timeout_seconds"):
            values["query_timeout_seconds"] = float(section["query_timeout_seconds"])
        if section.get("scrape_interval_seconds"):
            values["scrape_interval_seconds"] = float(section["scrape_interval_seconds"])
        given = {k: v for k, v in overrides.items() if v is not None}
        values.update(given)
        if "opa_url" not in given and section.get("opa_service"):
            values["opa_service"] = section["opa_service"]
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
    return float(fleet.controller.get("period_seconds") or settings.lease_seconds)
