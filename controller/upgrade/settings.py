"""The upgrade's view of the rendered configuration (docs/contracts.md).

Targets come from `pools.<pool>.driver_version` (pools whose driver the GPU Operator installs;
a pool without a driver version is not rolled), limits from `pools.<pool>.max_unavailable` and
`upgrade.max_parallel`, windows from `upgrade.maintenance_windows`. The remaining settings are
optional keys of the `upgrade` section with the defaults documented on `UpgradeSettings`.
`upgrade_settings` collects every problem with its path instead of stopping at the first.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from controller.config import ConfigProblems, FleetView
from controller.upgrade.limits import Window, parse_window, resolve_max_unavailable
from controller.upgrade.selectors import Selector, parse_selector

_DEFAULT_SELECTOR = parse_selector("app=nvidia-driver-daemonset")

DEFAULT_DRIVER_NAMESPACE = "gpu-operator"
DEFAULT_DRIVER_SELECTOR = _DEFAULT_SELECTOR.text
DEFAULT_VALIDATOR_IMAGE = "registry.fleetplane.internal/fleetplane/controller:0.1.0"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True, kw_only=True)
class PoolTarget:
    """A pool the controller rolls: its driver version and `max_unavailable` as configured
    (an integer, a digit string or "N%")."""

    name: str
    driver_version: str
    max_unavailable: int | str

    def limit(self, pool_nodes: int) -> int:
        resolved = resolve_max_unavailable(self.max_unavailable, pool_nodes)
        assert resolved is not None  # validated by upgrade_settings
        return resolved


@dataclass(frozen=True, kw_only=True)
class UpgradeSettings:
    """How driver upgrades are rolled.

    pools: the pools with a target driver (required; from `pools`).
    windows: when a node may start an upgrade (required; `upgrade.maintenance_windows`). Nodes
        already in the rollout finish outside the windows.
    max_parallel: nodes of a pool in the rollout at once, before `max_unavailable`
        (`upgrade.max_parallel`). Default 1.
    wait_for_jobs_timeout_seconds: how long GPU jobs on a cordoned node may run before they are
        evicted (`upgrade.wait_for_jobs_timeout_seconds`, else `upgrade.drain_timeout_seconds`).
        Default 1800.
    checkpoint_max_age_seconds: a pod whose `fleetplane.dev/last-checkpoint` is at most this old
        is evicted without waiting for the timeout. Default 900.
    validation_timeout_seconds: from the driver restart, how long the new driver pod, the driver
        labels, the validator and the node's allocatable GPUs may take before the node is marked
        failed. Default 1800.
    driver_namespace, driver_selector: where the GPU Operator's driver DaemonSet pods are, and
        their label selector (`k=v`, `k!=v`, `k`, `!k`, comma-separated). Default `gpu-operator`
        (or `gpu_operator.namespace` when the document has it) and `app=nvidia-driver-daemonset`.
        DaemonSet pods in `driver_namespace` are the operator's operands (device plugin, GFD,
        DCGM, dcgm-exporter, MIG manager, toolkit, validator): they restart with the driver and
        never block it.
    validator_namespace: where validator pods run. Default the controller's namespace
        (`controller.namespace`, else fleetplane-system).
    validator_image: image with Python, this package and nvidia-ml-py. Default
        `controller.image`, else registry.fleetplane.internal/fleetplane/controller:0.1.0.
    validator_runtime_class: RuntimeClass of the validator pod (e.g. `nvidia`); None leaves the
        node's default runtime. Default None.
    max_temperature_c, xid_wait_seconds: passed to the health check when set; None keeps the
        check's own defaults (85 C, 2 s). Default None.
    """

    pools: dict[str, PoolTarget]
    windows: tuple[Window, ...]
    max_parallel: int = 1
    wait_for_jobs_timeout_seconds: int = 1800
    checkpoint_max_age_seconds: int = 900
    validation_timeout_seconds: int = 1800
    driver_namespace: str = DEFAULT_DRIVER_NAMESPACE
    driver_selector: Selector = _DEFAULT_SELECTOR
    validator_namespace: str = "fleetplane-system"
    validator_image: str = DEFAULT_VALIDATOR_IMAGE
    validator_runtime_class: str | None = None
    max_temperature_c: int | None = None
    xid_wait_seconds: float | None = None


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def upgrade_settings(fleet: FleetView, **overrides: Any) -> UpgradeSettings:
    """`UpgradeSettings` from the rendered document; `overrides` (keyword = field name) win.
    Raises `ConfigProblems` listing every problem."""
    raw = fleet.raw
    problems: list[str] = []
    pools: dict[str, PoolTarget] = {}
    pools_raw = raw.get("pools") or {}
    if not isinstance(pools_raw, dict):
        problems.append("pools: must be an object")
        pools_raw = {}
    for name, pool in pools_raw.items():
        at = f"pools.{name}"
        if not isinstance(pool, dict):
            problems.append(f"{at}: must be an object")
            continue
        version = pool.get("driver_version")
        if not version or pool.get("driver_manager") == "cloud":
            continue  # the driver comes with the node image: nothing to roll
        if not isinstance(version, str):
            problems.append(f"{at}.driver_version: must be a string")
            continue
        limit = pool.get("max_unavailable", 1)
        if resolve_max_unavailable(limit, 1) is None:
            problems.append(
                f"{at}.max_unavailable: must be a non-negative integer or a percentage like "
                f'"10%", not {limit!r}'
            )
            continue
        pools[name] = PoolTarget(name=name, driver_version=version, max_unavailable=limit)

    section = raw.get("upgrade") or {}
    if not isinstance(section, dict):
        problems.append("upgrade: must be an object")
        section = {}
    windows_raw = section.get("maintenance_windows")
    windows: list[Window] = []
    if not isinstance(windows_raw, list):
        problems.append("upgrade.maintenance_windows: must be a list")
    else:
        for i, item in enumerate(windows_raw):
            window = parse_window(item, f"upgrade.maintenance_windows[{i}]", problems)
            if window is not None:
                windows.append(window)

    values: dict[str, Any] = {}

    def whole(key: str, *, minimum: int, fallback: str | None = None) -> None:
        source = key if key in section or fallback is None else fallback
        if section.get(source) is None:  # absent, or rendered as null: the default applies
            return
        value = section[source]
        if not _whole(value) or value < minimum:
            problems.append(f"upgrade.{source}: must be an integer of at least {minimum}")
        else:
            values[key] = value

    whole("max_parallel", minimum=1)
    whole("wait_for_jobs_timeout_seconds", minimum=0, fallback="drain_timeout_seconds")
    whole("checkpoint_max_age_seconds", minimum=0)
    whole("validation_timeout_seconds", minimum=1)
    whole("max_temperature_c", minimum=1)
    if section.get("xid_wait_seconds") is not None:
        wait = section["xid_wait_seconds"]
        if not _number(wait) or not 0 <= wait <= 60:
            problems.append("upgrade.xid_wait_seconds: must be a number from 0 to 60")
        else:
            values["xid_wait_seconds"] = float(wait)

    operator = raw.get("gpu_operator") if isinstance(raw.get("gpu_operator"), dict) else {}
    controller = fleet.controller
    names = {
        "driver_namespace": section.get("driver_namespace")
        or (operator or {}).get("namespace")
        or DEFAULT_DRIVER_NAMESPACE,
        "validator_namespace": section.get("validator_namespace")
        or controller.get("namespace")
        or "fleetplane-system",
    }
    for key, value in names.items():
        if not isinstance(value, str) or not _DNS_LABEL.match(value):
            problems.append(f"upgrade.{key}: must be a namespace name, not {value!r}")
        else:
            values[key] = value
    selector_text = section.get("driver_selector", DEFAULT_DRIVER_SELECTOR)
    try:
        values["driver_selector"] = parse_selector(selector_text)
    except ValueError as error:
        problems.append(f"upgrade.driver_selector: {error}")
    image = section.get("validator_image") or controller.get("image") or DEFAULT_VALIDATOR_IMAGE
    if not isinstance(image, str):
        problems.append("upgrade.validator_image: must be a string")
    else:
        values["validator_image"] = image
    runtime_class = section.get("validator_runtime_class")
    if runtime_class is not None and not isinstance(runtime_class, str):
        problems.append("upgrade.validator_runtime_class: must be a string")
    elif runtime_class:
        values["validator_runtime_class"] = runtime_class

    if problems:
        raise ConfigProblems(problems)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return UpgradeSettings(pools=pools, windows=tuple(windows), **values)
