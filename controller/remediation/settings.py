"""The health remediation's view of the rendered configuration (`health` section, the models'
`thermal` lines; docs/contracts.md). `health_settings` collects every problem with its path."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from controller.config import ConfigProblems, FleetView
from controller.nodeflow.slots import resolve_max_unavailable
from controller.upgrade.settings import UpgradeSettings, upgrade_settings

GANG_ANNOTATION = "scheduling.k8s.io/group-name"
"""Volcano's annotation naming a pod's PodGroup: the pods of one gang leave together."""


@dataclass(frozen=True, kw_only=True)
class HealthSettings:
    """How GPU faults are remediated (defaults: fleet.config.HealthConfig, the same numbers).

    max_unavailable: per pool, nodes the health machine may hold out of service at once.
    signal_window_seconds, stale_after_seconds, hot_for_seconds: how evidence is read.
    checkpoint_window_seconds, checkpoint_max_age_seconds: the drain's patience.
    remediation_timeout_seconds, validation_timeout_seconds: when a remedy is given up.
    thermal: model label value -> (hot_c, cool_c).
    pool_models: pool -> the node label and value of its model (for the thermal lines).
    scrape_interval_seconds: DCGM's scrape interval (expected samples, subquery step).
    upgrade: the upgrade's settings, for the validator pod (namespace, image, runtime class).
    """

    max_unavailable: int | str = "10%"
    signal_window_seconds: int = 600
    stale_after_seconds: int = 120
    hot_for_seconds: int = 300
    checkpoint_window_seconds: int = 1800
    checkpoint_max_age_seconds: int = 900
    remediation_timeout_seconds: int = 3600
    validation_timeout_seconds: int = 1800
    scrape_interval_seconds: int = 15
    thermal: dict[str, tuple[float, float]] = field(default_factory=dict)
    upgrade: UpgradeSettings | None = None

    def limit(self, pool_nodes: int) -> int:
        resolved = resolve_max_unavailable(self.max_unavailable, pool_nodes)
        assert resolved is not None  # validated by health_settings
        return resolved

    @property
    def expected_hot_samples(self) -> int:
        """Samples a GPU must show in `hot_for_seconds` to judge its temperature (one missed
        scrape in twenty tolerated, as for idleness)."""
        return max(1, math.ceil(self.hot_for_seconds / self.scrape_interval_seconds * 0.95))


def health_settings(fleet: FleetView, **overrides: Any) -> HealthSettings:
    raw = fleet.raw
    problems: list[str] = []
    section = raw.get("health") or {}
    if not isinstance(section, dict):
        problems.append("health: must be an object")
        section = {}
    values: dict[str, Any] = {}
    limit = section.get("max_unavailable", "10%")
    if resolve_max_unavailable(limit, 1) is None:
        problems.append(f'health.max_unavailable: must be an integer or "N%", not {limit!r}')
    else:
        values["max_unavailable"] = limit
    for key in (
        "signal_window_seconds",
        "stale_after_seconds",
        "hot_for_seconds",
        "checkpoint_window_seconds",
        "checkpoint_max_age_seconds",
        "remediation_timeout_seconds",
        "validation_timeout_seconds",
    ):
        value = section.get(key)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            problems.append(f"health.{key}: must be a non-negative integer")
        else:
            values[key] = value
    scrape = fleet.controller.get("scrape_interval_seconds", 15)
    if isinstance(scrape, int | float) and not isinstance(scrape, bool) and scrape > 0:
        values["scrape_interval_seconds"] = int(scrape)
    thermal: dict[str, tuple[float, float]] = {}
    for name, model in (raw.get("models") or {}).items():
        lines = model.get("thermal") if isinstance(model, dict) else None
        if lines is None:
            continue
        hot, cool = (
            (lines.get("hot_c"), lines.get("cool_c")) if isinstance(lines, dict) else (None, None)
        )
        if not (_number(hot) and _number(cool)) or cool >= hot:
            problems.append(
                f"models.{name}.thermal: hot_c and cool_c must be numbers, cool_c below hot_c"
            )
            continue
        thermal[str(model.get("label_value", name))] = (float(hot), float(cool))
    values["thermal"] = thermal
    try:
        values["upgrade"] = upgrade_settings(fleet)
    except ConfigProblems as error:
        problems += error.problems
    if problems:
        raise ConfigProblems(problems)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return HealthSettings(**values)


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)
