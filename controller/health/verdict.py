"""Run the check on a node and shape the verdict the validator pod prints.

The verdict is one JSON object on stdout; its status is also the process's exit status:

| status      | exit | meaning                                                              |
| ----------- | ---- | -------------------------------------------------------------------- |
| healthy     | 0    | every check passed or had no evidence ("not supported") on that GPU  |
| unhealthy   | 1    | at least one problem                                                 |
| unavailable | 2    | NVML could not be used (or the check itself broke): nothing checked  |

`reason` is `no-driver` when libnvidia-ml could not be loaded (no NVIDIA driver), else null.

In the JSON, a reading is its value, `"not supported"`, or `"error: <message> (<class>)"`;
`null` means it was not read at all.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controller.health.judge import DEVICE_CHECKS, Expectations, Problem, judge
from controller.health.observe import (
    DeviceSnapshot,
    NodeSnapshot,
    Nvml,
    Unavailable,
    XidWatch,
    observe,
)
from controller.health.xids import CRITICAL_XIDS

EXIT_HEALTHY = 0
EXIT_UNHEALTHY = 1
EXIT_UNAVAILABLE = 2

HEALTHY = "healthy"
UNHEALTHY = "unhealthy"
UNAVAILABLE = "unavailable"

_EXIT_CODES = {HEALTHY: EXIT_HEALTHY, UNHEALTHY: EXIT_UNHEALTHY, UNAVAILABLE: EXIT_UNAVAILABLE}

NO_DRIVER = "no-driver"
"""The verdict's `reason` when libnvidia-ml cannot be loaded at all: the node has no NVIDIA driver
(or the runtime did not mount it into the pod). Unlike a driver that is still loading
(`NVMLError_DriverNotLoaded`) or a library/module mismatch, this does not go away by waiting, so
the validator's reader fails the node at once instead of retrying until its timeout."""

_NO_DRIVER_ERRORS = frozenset({"NVMLError_LibraryNotFound"})


def unavailable_reason(snapshot: NodeSnapshot) -> str | None:
    """`no-driver` when NVML's library could not be loaded; None otherwise."""
    error = snapshot.init_error
    if error is not None and error.error in _NO_DRIVER_ERRORS:
        return NO_DRIVER
    return None


# Names of the nvmlClocksEventReason* bits, by the binding's constant for each.
_CLOCKS_EVENT_REASONS = (
    ("gpu_idle", "nvmlClocksThrottleReasonGpuIdle"),
    ("applications_clocks_setting", "nvmlClocksThrottleReasonApplicationsClocksSetting"),
    ("sw_power_cap", "nvmlClocksThrottleReasonSwPowerCap"),
    ("hw_slowdown", "nvmlClocksThrottleReasonHwSlowdown"),
    ("sync_boost", "nvmlClocksThrottleReasonSyncBoost"),
    ("sw_thermal_slowdown", "nvmlClocksThrottleReasonSwThermalSlowdown"),
    ("hw_thermal_slowdown", "nvmlClocksThrottleReasonHwThermalSlowdown"),
    ("hw_power_brake_slowdown", "nvmlClocksThrottleReasonHwPowerBrakeSlowdown"),
    ("display_clock_setting", "nvmlClocksThrottleReasonDisplayClockSetting"),
)

# Architecture names, by the binding's NVML_DEVICE_ARCH_* constant.
_ARCHITECTURES = (
    "KEPLER",
    "MAXWELL",
    "PASCAL",
    "VOLTA",
    "TURING",
    "AMPERE",
    "ADA",
    "HOPPER",
    "BLACKWELL",
)


@dataclass(frozen=True)
class Verdict:
    status: str
    """healthy, unhealthy or unavailable."""
    document: dict[str, Any]
    """What the validator prints (JSON-serialisable)."""

    @property
    def healthy(self) -> bool:
        return self.status == HEALTHY

    @property
    def exit_code(self) -> int:
        return _EXIT_CODES[self.status]


def default_nvml() -> Nvml:
    """The real binding. Imported here, not at module import, so the controller can import this
    package on machines without nvidia-ml-py."""
    import pynvml

    return pynvml


def check_node(
    expect: Expectations,
    *,
    node: str,
    nvml: Nvml | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Verdict:
    """Read the node's GPUs through NVML (`pynvml` unless another binding is given) and judge
    them against `expect`."""
    binding = default_nvml() if nvml is None else nvml
    snapshot = observe(binding, xid_wait_seconds=expect.xid_wait_seconds, clock=clock)
    return render(snapshot, expect, node=node, nvml=binding)


def render(snapshot: NodeSnapshot, expect: Expectations, *, node: str, nvml: Nvml) -> Verdict:
    """The verdict for a snapshot (`nvml` only names bits and architectures)."""
    judgement = judge(snapshot, expect)
    if snapshot.init_error is not None:
        status = UNAVAILABLE
    else:
        status = UNHEALTHY if judgement.problems else HEALTHY
    devices = [
        _device(device, judgement.device_checks.get(device.index, {}), snapshot.xid_watch, nvml)
        for device in snapshot.devices
    ]
    return Verdict(
        status=status,
        document=_document(
            status=status,
            node=node,
            expect=expect,
            driver_version=_reading(snapshot.driver_version),
            cuda_driver_version=_cuda_version(snapshot.cuda_driver_version),
            device_count=_reading(snapshot.device_count),
            devices=devices,
            xid_watch=snapshot.xid_watch,
            problems=judgement.problems,
            reason=unavailable_reason(snapshot),
        ),
    )


def failed_verdict(expect: Expectations, *, node: str, check: str, detail: str) -> Verdict:
    """An `unavailable` verdict for a check that could not run at all."""
    return Verdict(
        status=UNAVAILABLE,
        document=_document(
            status=UNAVAILABLE,
            node=node,
            expect=expect,
            driver_version=None,
            cuda_driver_version=None,
            device_count=None,
            devices=[],
            xid_watch=None,
            problems=[Problem(None, check, detail)],
        ),
    )


def _document(
    *,
    status: str,
    node: str,
    expect: Expectations,
    driver_version: Any,
    cuda_driver_version: Any,
    device_count: Any,
    devices: list[dict[str, Any]],
    xid_watch: XidWatch | None,
    problems: list[Problem],
    reason: str | None = None,
) -> dict[str, Any]:
    return {
        "healthy": status == HEALTHY,
        "status": status,
        "reason": reason,
        "node": node,
        "driver_version": driver_version,
        "cuda_driver_version": cuda_driver_version,
        "device_count": device_count,
        "expected": {
            "driver_version": expect.driver_version,
            "gpu_count": expect.gpu_count,
            "max_temperature_c": expect.max_temperature_c,
            "xid_wait_seconds": expect.xid_wait_seconds,
            "critical_xids": sorted(CRITICAL_XIDS),
        },
        "xid_watch": None
        if xid_watch is None
        else {
            "wait_ms": xid_watch.wait_ms,
            "error": _reading(xid_watch.set_error or xid_watch.wait_error),
        },
        "devices": devices,
        "problems": [
            {"device": problem.device, "check": problem.check, "detail": problem.detail}
            for problem in problems
        ],
    }


def _device(
    device: DeviceSnapshot, checks: dict[str, str], watch: XidWatch | None, nvml: Nvml
) -> dict[str, Any]:
    ordered_checks = {name: checks[name] for name in DEVICE_CHECKS if name in checks}
    readings = device.readings
    if readings is None:
        return {
            "index": device.index,
            "handle": _reading(device.handle_error),
            "checks": ordered_checks,
        }
    ecc_mode = readings.ecc_mode
    rows = readings.remapped_rows
    utilization = readings.utilization
    registration = watch.registration.get(device.index) if watch else None
    return {
        "index": device.index,
        "name": _reading(readings.name),
        "uuid": _reading(readings.uuid),
        "pci_bus_id": _reading(readings.pci_bus_id),
        "architecture": _architecture(readings.architecture, nvml),
        "ecc_mode": _reading(ecc_mode)
        if isinstance(ecc_mode, Unavailable)
        else {"current": _enabled(ecc_mode[0]), "pending": _enabled(ecc_mode[1])},
        "ecc_errors": {
            "volatile": {
                "double_bit": _reading(readings.ecc.volatile_double_bit),
                "single_bit": _reading(readings.ecc.volatile_single_bit),
            },
            "aggregate": {
                "double_bit": _reading(readings.ecc.aggregate_double_bit),
                "single_bit": _reading(readings.ecc.aggregate_single_bit),
            },
        },
        "retired_pages": {
            "double_bit": _reading(readings.retired_pages.double_bit),
            "single_bit": _reading(readings.retired_pages.single_bit),
            "pending": _reading(readings.retired_pages.pending),
        },
        "remapped_rows": _reading(rows)
        if isinstance(rows, Unavailable)
        else {
            "corrected": rows.corrected,
            "uncorrected": rows.uncorrected,
            "pending": rows.pending,
            "failure": rows.failure,
        },
        "temperature_c": _reading(readings.temperature_c),
        "temperature_thresholds_c": {
            "slowdown": _reading(readings.slowdown_temperature_c),
            "shutdown": _reading(readings.shutdown_temperature_c),
        },
        "power_w": {
            "usage": _watts(readings.power_usage_mw),
            "limit": _watts(readings.power_limit_mw),
        },
        "utilization_percent": _reading(utilization)
        if isinstance(utilization, Unavailable)
        else {"gpu": utilization[0], "memory": utilization[1]},
        "clocks_event_reasons": _clocks_event_reasons(readings.clocks_event_reasons, nvml),
        "xid_events": [
            event.xid for event in (watch.events if watch else []) if event.device == device.index
        ],
        "xid_watch": "registered"
        if watch and device.index in watch.registration and registration is None
        else _reading(registration),
        "checks": ordered_checks,
    }


def _reading(value: Any) -> Any:
    return value.describe() if isinstance(value, Unavailable) else value


def _enabled(flag: bool) -> str:
    return "enabled" if flag else "disabled"


def _watts(milliwatts: Any) -> Any:
    return _reading(milliwatts) if isinstance(milliwatts, Unavailable) else milliwatts / 1000


def _cuda_version(reading: Any) -> Any:
    if reading is None or isinstance(reading, Unavailable):
        return _reading(reading)
    return f"{reading // 1000}.{reading % 1000 // 10}"


def _architecture(reading: Any, nvml: Nvml) -> Any:
    if isinstance(reading, Unavailable):
        return _reading(reading)
    for name in _ARCHITECTURES:
        if getattr(nvml, f"NVML_DEVICE_ARCH_{name}", None) == reading:
            return name.lower()
    return f"unknown ({reading})"


def _clocks_event_reasons(reading: Any, nvml: Nvml) -> Any:
    if isinstance(reading, Unavailable):
        return _reading(reading)
    names = []
    rest = int(reading)
    for name, constant in _CLOCKS_EVENT_REASONS:
        bit = getattr(nvml, constant, 0)
        if bit and rest & bit:
            names.append(name)
            rest &= ~bit
    if rest:
        names.append(f"other (0x{rest:x})")
    return names
