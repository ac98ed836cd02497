"""The health remediation's view of the decoded configuration (fleet/contract: the `health`
section, the models' `thermal` lines; docs/contracts.md). `health_settings` reports every
problem of those with its path."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from controller.config import ConfigProblems, FleetView, owned_by_health
from controller.nodeflow.settings import WorkflowSettings, owned_by_workflows, workflow_values
from controller.nodeflow.slots import resolve_max_unavailable

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
    workflow: the validator pod and the driver pods, as the node workflows' base reads them
        (the `upgrade` section's keys, shared with the driver upgrade).
    recovery: `act` (the controller resets the GPU or reboots the node itself, `acting`) or
        `annotate` (it writes the request for an integration and waits for its answer).
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
    workflow: WorkflowSettings = field(default_factory=WorkflowSettings)
    recovery: str = "act"

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
    """`HealthSettings` from the decoded document; `overrides` (keyword = field name) win.
    Raises `ConfigProblems` listing every problem: the decoder's in `health` and the models'
    `thermal` lines, and those of the validator pod's and driver pods' keys."""
    problems = fleet.problems_of(owned_by_health) + fleet.problems_of(owned_by_workflows)
    section = fleet.document.health
    values: dict[str, Any] = {
        "max_unavailable": section.max_unavailable,
        "signal_window_seconds": section.signal_window_seconds,
        "stale_after_seconds": section.stale_after_seconds,
        "hot_for_seconds": section.hot_for_seconds,
        "checkpoint_window_seconds": section.checkpoint_window_seconds,
        "checkpoint_max_age_seconds": section.checkpoint_max_age_seconds,
        "remediation_timeout_seconds": section.remediation_timeout_seconds,
        "validation_timeout_seconds": section.validation_timeout_seconds,
        "recovery": section.recovery,
    }
    scrape = fleet.controller.scrape_interval_seconds
    if scrape > 0:
        values["scrape_interval_seconds"] = int(scrape)
    values["thermal"] = {
        model.label_value or name: (float(model.thermal.hot_c), float(model.thermal.cool_c))
        for name, model in fleet.document.models.items()
        if model.thermal is not None
    }
    shared = workflow_values(fleet, problems)
    if problems:
        raise ConfigProblems(problems)
    values["workflow"] = WorkflowSettings(**shared)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return HealthSettings(**values)
