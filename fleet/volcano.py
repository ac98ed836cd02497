"""Volcano's scheduler configuration (`volcano-scheduler.conf`): the plugin tiers and their
arguments. Declaration only: components/volcano.py ships it with the Helm release, and the
replay's pack mode models the placement it makes, so both read it from here."""

from __future__ import annotations

from typing import Any

import yaml

from fleet import labels
from fleet.config import FleetConfig

BINPACK_ARGUMENTS: dict[str, Any] = {
    # Upstream binpack (pkg/scheduler/plugins/binpack/binpack.go) scores only cpu, memory and
    # the resources named in `binpack.resources`, a comma-separated string (not a list), each
    # weighted by `binpack.resources.<name>` (default 1). Without it accelerators are not
    # packed at all. Accelerators weigh 10 against cpu and memory's 1, so a free GPU or TPU
    # slot decides the node, and the plugin's weight outranks nodeorder's spreading
    # (leastrequested).
    "binpack.weight": 10,
    "binpack.cpu": 1,
    "binpack.memory": 1,
    "binpack.resources": f"{labels.GPU_RESOURCE}, {labels.TPU_RESOURCE}",
    f"binpack.resources.{labels.GPU_RESOURCE}": 10,
    f"binpack.resources.{labels.TPU_RESOURCE}": 10,
}

SCHEDULER_TIERS: list[dict[str, Any]] = [
    {
        "plugins": [
            {"name": "priority"},
            {"name": "gang", "enablePreemptable": False},
            {"name": "conformance"},
        ]
    },
    {
        "plugins": [
            {"name": "drf", "enablePreemptable": False},
            {"name": "predicates"},
            {"name": "proportion"},
            {"name": "nodeorder"},
            {"name": "binpack", "arguments": BINPACK_ARGUMENTS},
        ]
    },
]
"""Gang scheduling and priority first; then fair share (drf), per-queue proportion with
guarantees and capabilities, and packing accelerators onto as few nodes as possible."""


def scheduler_config(fleet: FleetConfig) -> str:
    """The `volcano-scheduler.conf` document."""
    return yaml.safe_dump(
        {"actions": ", ".join(fleet.volcano.actions), "tiers": SCHEDULER_TIERS}, sort_keys=False
    )


def plugin_arguments(tiers: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """The arguments of the named plugin in the tiers ({} without arguments), None when the
    plugin is not enabled."""
    for tier in tiers:
        for plugin in tier.get("plugins", []):
            if plugin.get("name") == name:
                return dict(plugin.get("arguments") or {})
    return None
