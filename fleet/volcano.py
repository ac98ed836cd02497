"""Volcano's scheduler configuration (`volcano-scheduler.conf`): the plugin tiers and their
arguments. Declaration only: components/volcano.py ships it with the Helm release, and the
replay's pack mode models the placement it makes, so both read it from here."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from fleet import labels
from fleet.config import FleetConfig
from fleet.placement import placement_tiers

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


RESOURCE_STRATEGY_FIT = "resource-strategy-fit"


def scheduler_tiers(fleet: FleetConfig) -> list[dict[str, Any]]:
    """The plugin tiers a fleet's scheduler runs: SCHEDULER_TIERS, with the CPU reserved for
    idle GPUs when `volcano.reserve_cpu_per_idle_gpu` is set."""
    cpu = fleet.volcano.reserve_cpu_per_idle_gpu
    return SCHEDULER_TIERS if cpu is None else reserve_cpu_for_gpus(SCHEDULER_TIERS, cpu=cpu)


def scheduler_config(fleet: FleetConfig) -> str:
    """The `volcano-scheduler.conf` document (with the placement service's extender when
    `volcano.placement` is fgd: fleet.placement)."""
    tiers = placement_tiers(fleet.volcano, scheduler_tiers(fleet))
    return yaml.safe_dump(
        {"actions": ", ".join(fleet.volcano.actions), "tiers": tiers},
        sort_keys=False,
    )


def with_arguments(
    tiers: list[dict[str, Any]], plugin: str, arguments: dict[str, Any]
) -> list[dict[str, Any]]:
    """A copy of the tiers with `arguments` set on the named plugin (added to the last tier
    when it is not enabled)."""
    out = copy.deepcopy(tiers)
    for tier in out:
        for entry in tier.get("plugins", []):
            if entry.get("name") == plugin:
                entry["arguments"] = {**(entry.get("arguments") or {}), **arguments}
                return out
    out[-1].setdefault("plugins", []).append({"name": plugin, "arguments": dict(arguments)})
    return out


def reserve_cpu_for_gpus(
    tiers: list[dict[str, Any]], *, cpu: float, memory: float = 0
) -> list[dict[str, Any]]:
    """The tiers plus resource-strategy-fit's proportional predicate for `nvidia.com/gpu` and
    nothing else of the plugin (`resourceStrategyFitWeight: 0`, no `sra`): a pod without GPUs
    goes only where `cpu` cores and `memory` GB per idle GPU stay idle after it
    (pkg/scheduler/plugins/resource-strategy-fit/proportional.go, Volcano v1.15)."""
    return with_arguments(
        tiers,
        RESOURCE_STRATEGY_FIT,
        {
            "resourceStrategyFitWeight": 0,
            "proportional": {
                "enable": True,
                "resources": labels.GPU_RESOURCE,
                "resourceProportion": {
                    f"{labels.GPU_RESOURCE}.cpu": cpu,
                    f"{labels.GPU_RESOURCE}.memory": memory,
                },
            },
        },
    )


def plugin_arguments(tiers: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """The arguments of the named plugin in the tiers ({} without arguments), None when the
    plugin is not enabled."""
    for tier in tiers:
        for plugin in tier.get("plugins", []):
            if plugin.get("name") == name:
                return dict(plugin.get("arguments") or {})
    return None
