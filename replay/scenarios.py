"""Scenarios: each a validated fleetplane configuration plus how the replay runs it.

`scenarios.yaml` (beside this file, or any file in the same shape) holds a base `fleet`, the
team `assignment` of each workload type, and the scenarios. Sizes written as `${expression}`
are derived from the trace before validation (see the file's header). Each scenario's fleet
goes through the same validation (`fleet.config.parse_fleet`) and rendering
(`fleet.render.render_opa_data`) as a stack, so the OPA data document, the controller's
view and the prices the replay charges are the ones a deployment would have.
"""

from __future__ import annotations

import ast
import copy
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from controller.config import FleetView, parse_config
from fleet.config import FleetConfig, PoolConfig, parse_fleet
from fleet.render import render_opa_data
from replay.node_pools import NodeShape, pools_for
from replay.workloads import WORKLOAD_TYPES

DEFAULT_SCENARIOS = Path(__file__).resolve().parent / "scenarios.yaml"
CONCERNS = ("idle", "spend", "preempt")
QUEUEING = ("fifo", "fair-share")


class ScenarioError(ValueError):
    """The scenario file cannot be used; the message says where and why."""


@dataclass(frozen=True, kw_only=True)
class Scenario:
    name: str
    title: str
    summary: str
    concerns: tuple[str, ...]
    queueing: str
    spot_types: tuple[str, ...]
    fleet: FleetConfig
    document: dict[str, Any]
    """The rendered configuration (`data.fleetplane.config`)."""
    view: FleetView
    """The controller's view of `document`."""
    priorities: dict[str, int]
    """PriorityClass name → value, as the cluster would hold them."""
    pool_shapes: dict[str, NodeShape]
    """The node list's shape of each pool built from it (`trace_pools`); pools written out in
    the file have none (their nodes' CPU and memory are not limited)."""

    @property
    def period_seconds(self) -> int:
        return int(self.document["controller"]["period_seconds"])

    @property
    def preemption_pending_seconds(self) -> int:
        return int(self.document["controller"]["preemption_pending_seconds"])

    @property
    def scrape_interval_seconds(self) -> float:
        return float(self.document["controller"]["scrape_interval_seconds"])

    @property
    def has_spot(self) -> bool:
        return any(p.capacity_type == "spot" for p in self.fleet.pools)

    def pool(self, name: str) -> PoolConfig:
        return next(p for p in self.fleet.pools if p.name == name)

    def capacity_of(self, workload_type: str) -> str:
        """Where a workload of this type is submitted: `spot` or `on-demand`."""
        allowed = self.fleet.workload_types[workload_type].capacity
        if not self.has_spot or allowed == "on-demand":
            return "on-demand"
        if allowed == "spot" or workload_type in self.spot_types:
            return "spot"
        return "on-demand"


@dataclass(frozen=True, kw_only=True)
class ScenarioSet:
    scenarios: list[Scenario]
    assignment: dict[str, dict[str, float]]
    source: str
    variables: dict[str, int]


_OPERATORS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "ceil": math.ceil,
    "floor": math.floor,
    "min": min,
    "max": max,
}
_PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")


def evaluate(expression: str, variables: Mapping[str, int]) -> int:
    """A whole number from arithmetic on the trace's variables (+ - * / // %, ceil, floor,
    min, max); anything else is refused."""

    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return node.value
        if isinstance(node, ast.Name) and node.id in variables:
            return variables[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCTIONS
            and not node.keywords
        ):
            return _FUNCTIONS[node.func.id](*(walk(a) for a in node.args))
        raise ScenarioError(
            f"${{{expression}}}: only numbers, {', '.join(sorted(variables))}, arithmetic and "
            f"{', '.join(sorted(_FUNCTIONS))} are allowed"
        )

    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as error:
        raise ScenarioError(f"${{{expression}}}: {error.msg}") from None
    value = walk(tree)
    if isinstance(value, float):
        if not value.is_integer():
            raise ScenarioError(f"${{{expression}}} = {value}, not a whole number")
        value = int(value)
    return int(value)


def substitute(text: str, variables: Mapping[str, int]) -> str:
    """Every `${expression}` outside comment lines replaced by its value."""
    return "".join(
        line
        if line.lstrip().startswith("#")
        else _PLACEHOLDER.sub(lambda m: str(evaluate(m.group(1), variables)), line)
        for line in text.splitlines(keepends=True)
    )


def _merge(base: Any, override: Any) -> Any:
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for key, value in override.items():
            out[key] = _merge(base[key], value) if key in base else copy.deepcopy(value)
        return out
    return copy.deepcopy(override)


def _strings(value: Any, at: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ScenarioError(f"{at}: must be a list of strings")
    return tuple(value)


def load_scenarios(
    path: Path = DEFAULT_SCENARIOS,
    *,
    variables: Mapping[str, int],
    only: tuple[str, ...] = (),
    shapes: list[NodeShape] | None = None,
) -> ScenarioSet:
    """The file's default scenarios, or those named in `only` (`all`: every one), in the
    file's order."""
    try:
        raw = yaml.safe_load(substitute(path.read_text(encoding="utf-8"), variables))
    except OSError as error:
        raise ScenarioError(f"{path}: {error}") from error
    except yaml.YAMLError as error:
        raise ScenarioError(f"{path}: not YAML: {error}") from error
    if not isinstance(raw, dict) or not isinstance(raw.get("scenarios"), list):
        raise ScenarioError(f"{path}: needs `fleet`, `assignment` and a list of `scenarios`")
    assignment = _assignment(raw.get("assignment"), path)
    names = [s.get("name") for s in raw["scenarios"] if isinstance(s, dict)]
    unknown = [n for n in only if n not in names and n != "all"]
    if unknown:
        raise ScenarioError(
            f"{path}: no scenario {', '.join(unknown)} (known: {', '.join(map(str, names))})"
        )
    scenarios = []
    for index, entry in enumerate(raw["scenarios"]):
        if not isinstance(entry, dict) or not entry.get("name"):
            raise ScenarioError(f"{path}: scenarios[{index}] needs a name")
        if only and entry["name"] not in only and "all" not in only:
            continue
        if not only and entry.get("default", True) is False:
            continue
        scenarios.append(
            _scenario(entry, raw.get("fleet") or {}, assignment, path, shapes, variables)
        )
    return ScenarioSet(
        scenarios=scenarios, assignment=assignment, source=str(path), variables=dict(variables)
    )


def _assignment(raw: Any, path: Path) -> dict[str, dict[str, float]]:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{path}: `assignment` must map each workload type to team shares")
    out: dict[str, dict[str, float]] = {}
    for kind in WORKLOAD_TYPES:
        shares = raw.get(kind)
        if not isinstance(shares, dict) or not shares:
            raise ScenarioError(f"{path}: assignment.{kind}: give the teams and their shares")
        out[kind] = {str(team): float(share) for team, share in shares.items()}
    return out


def _scenario(
    entry: dict[str, Any],
    base: dict[str, Any],
    assignment: dict[str, dict[str, float]],
    path: Path,
    shapes: list[NodeShape] | None = None,
    variables: Mapping[str, int] | None = None,
) -> Scenario:
    name = str(entry["name"])
    at = f"{path}: scenario {name}"
    concerns = _strings(entry.get("controller", list(CONCERNS)), f"{at}.controller")
    bad = [c for c in concerns if c not in CONCERNS]
    if bad:
        raise ScenarioError(f"{at}.controller: unknown concern(s) {', '.join(bad)}")
    queueing = entry.get("queueing", "fifo")
    if queueing not in QUEUEING:
        raise ScenarioError(f"{at}.queueing: one of {', '.join(QUEUEING)}")
    spot_types = _strings(entry.get("spot_types", []), f"{at}.spot_types")
    merged = _merge(base, entry.get("fleet") or {})
    pool_shapes: dict[str, NodeShape] = {}
    trace_pools = entry.get("trace_pools")
    if trace_pools is not None:
        if not isinstance(trace_pools, list) or not all(isinstance(t, dict) for t in trace_pools):
            raise ScenarioError(f"{at}.trace_pools: a list of pool settings")
        if not shapes:
            raise ScenarioError(f"{at}.trace_pools: the trace has no node list to build pools from")
        pools = []
        for spec in trace_pools:
            built = pools_for(shapes, spec, peak_gpus=int((variables or {}).get("peak_gpus", 1)))
            pools += built
            pool_shapes |= {p["name"]: s for p, s in zip(built, shapes, strict=True)}
        clusters = merged.get("clusters") or [{"name": "replay", "provider": "local"}]
        merged["clusters"] = [{**clusters[0], "pools": pools}, *clusters[1:]]
    # The replay runs the controller's decision code itself: its fleet deploys no CronJob (and
    # so names no controller image) and no Pushgateway (its passes push nothing).
    merged["controller"] = {**(merged.get("controller") or {}), "deploy": False}
    observability = merged.get("observability") or {}
    merged["observability"] = {
        **observability,
        "pushgateway": {**(observability.get("pushgateway") or {}), "deploy": False},
    }
    fleet = parse_fleet(merged)
    teams = {t.name for t in fleet.teams}
    for kind, shares in assignment.items():
        missing = [t for t in shares if t not in teams]
        if missing:
            raise ScenarioError(f"{at}: assignment.{kind} names unknown team(s) {missing}")
    gpu_pools = [p for p in fleet.pools if not p.accelerator.is_tpu]
    if not gpu_pools:
        raise ScenarioError(f"{at}: the fleet has no GPU pool")
    document = render_opa_data(fleet)
    return Scenario(
        name=name,
        title=str(entry.get("title", name)),
        summary=" ".join(str(entry.get("summary", "")).split()),
        concerns=tuple(c for c in CONCERNS if c in concerns),
        queueing=str(queueing),
        spot_types=spot_types,
        fleet=fleet,
        document=document,
        view=parse_config(document),
        priorities={pc.name: pc.value for pc in fleet.priority_classes()},
        pool_shapes=pool_shapes,
    )
