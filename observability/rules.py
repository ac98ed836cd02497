"""The rule set: observability/rules.yaml with the stack's numbers filled in.

`[[ name ]]` in the YAML is replaced by `rule_values(config)[name]` before parsing; a name
without a value is an error, so the file cannot silently keep a placeholder. The same groups go
into the PrometheusRule of a cloud stack (`prometheus_rule`) and into the rule file of the local
fleet's Prometheus (`write_rule_file`).
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from fleet.config import FleetConfig
from fleet.placement import HTTP_TIMEOUT, placement_slow_seconds
from fleet.xids import actionable_xids

RULES_FILE = "rules.yaml"
WEBHOOK_NAME = "admission.fleetplane.dev"
"""The admission webhook's name (components/policy_gate.py), the `name` label of the API
server's admission webhook metrics."""
_PLACEHOLDER = re.compile(r"\[\[\s*([a-z_]+)\s*\]\]")


def source() -> str:
    """The rule set as written, placeholders and all."""
    return resources.files("observability").joinpath(RULES_FILE).read_text(encoding="utf-8")


def rule_values(config: FleetConfig) -> dict[str, str]:
    """The configuration's numbers, as they are written into the rules, and the Xids that page
    (those the fleet's Xid table gives a remedy, as a regex alternation)."""
    settings = config.observability
    return {
        "budget_warn_ratio": f"{config.budget.warn_ratio:g}",
        "budget_deny_ratio": f"{config.budget.deny_ratio:g}",
        "budget_warn_percent": f"{config.budget.warn_ratio * 100:g}",
        "budget_deny_percent": f"{config.budget.deny_ratio * 100:g}",
        "idle_gpus_alert": str(settings.idle_gpus_alert),
        "idle_alert_for": f"{settings.idle_alert_for_seconds}s",
        "hot_gpu_celsius": f"{settings.hot_gpu_celsius:g}",
        "queue_wait_target_seconds": f"{settings.queue_wait_target_seconds:g}",
        "controller_stale_seconds": str(settings.controller_stale_seconds),
        "fragmented_share_alert": f"{settings.fragmented_gpus_alert_share:g}",
        "fragmented_alert_for": f"{settings.fragmented_alert_for_seconds}s",
        "webhook": WEBHOOK_NAME,
        "actionable_xids": "|".join(str(xid) for xid in actionable_xids()),
        "placement_slow_seconds": f"{placement_slow_seconds():g}",
        "placement_timeout": HTTP_TIMEOUT,
    }


def render(config: FleetConfig, text: str | None = None) -> str:
    """The rule file's text with the configuration's numbers in place."""
    values = rule_values(config)

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(f"{RULES_FILE}: no configuration value for [[ {name} ]]")
        return values[name]

    return _PLACEHOLDER.sub(fill, source() if text is None else text)


def rule_groups(config: FleetConfig) -> list[dict[str, Any]]:
    """The `groups` of the rendered rule set."""
    groups = yaml.safe_load(render(config))["groups"]
    return list(groups)


def alert_names(config: FleetConfig) -> list[str]:
    return [r["alert"] for g in rule_groups(config) for r in g["rules"] if "alert" in r]


def record_names(config: FleetConfig) -> list[str]:
    return [r["record"] for g in rule_groups(config) for r in g["rules"] if "record" in r]


def write_rule_file(config: FleetConfig, path: Path) -> Path:
    """The rendered rule set as a Prometheus rule file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"groups": rule_groups(config)}, sort_keys=False))
    return path
