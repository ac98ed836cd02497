"""Judge a node snapshot against what the node must be. Pure functions, no NVML.

Each check ends in one status per device:

- `pass`: the reading was taken and is fine;
- `fail`: the reading shows a fault, or NVML failed to give it (an error other than "not
  supported"); either way there is a problem in the verdict;
- `not supported`: the GPU does not offer what the check reads. This is never counted as a
  pass, and never as a failure either: the check simply has no evidence on that GPU;
- `not applicable: ...` / `skipped: ...`: another mechanism covers it on this GPU (row
  remapping instead of page retirement, or the reverse), or ECC is disabled.

Per-check decisions on "not supported" are documented in controller/health/README.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.health.observe import (
    DeviceReadings,
    NodeSnapshot,
    Unavailable,
    XidWatch,
)
from controller.health.xids import CRITICAL_XIDS, describe_xid

PASS = "pass"
FAIL = "fail"
NOT_SUPPORTED = "not supported"

DEVICE_CHECKS = ("device_handle", "ecc_dbe", "retired_pages", "row_remap", "temperature", "xid")
"""Per-device checks, in the order they appear in the verdict."""


@dataclass(frozen=True, kw_only=True)
class Expectations:
    """What a node must show to pass."""

    driver_version: str
    """NVIDIA driver version, exactly as NVML reports it (e.g. 570.124.06). Required."""
    gpu_count: int
    """GPUs NVML must enumerate, every one with a handle that opens. Required."""
    max_temperature_c: int = 85
    """Highest acceptable GPU core temperature, degrees Celsius. Default 85."""
    xid_wait_seconds: float = 2.0
    """How long to listen for Xid events. Default 2.0; 0 reads only events already queued."""


@dataclass(frozen=True)
class Problem:
    device: int | None
    """NVML index of the GPU, None for the node as a whole."""
    check: str
    detail: str


@dataclass
class Judgement:
    problems: list[Problem] = field(default_factory=list)
    device_checks: dict[int, dict[str, str]] = field(default_factory=dict)
    """Per device index: check name -> status."""


def judge(snapshot: NodeSnapshot, expect: Expectations) -> Judgement:
    """Every problem the snapshot shows, and each device's check statuses. A snapshot whose
    NVML did not initialise has one problem, `nvml`, and no device statuses."""
    out = Judgement()
    if snapshot.init_error is not None:
        out.problems.append(
            Problem(None, "nvml", f"NVML unavailable: {_error(snapshot.init_error)}")
        )
        return out
    out.problems += _check_driver_version(snapshot.driver_version, expect.driver_version)
    out.problems += _check_device_count(snapshot.device_count, expect.gpu_count)
    watch = snapshot.xid_watch or XidWatch(wait_ms=0)
    for device in snapshot.devices:
        statuses: dict[str, str] = {}
        if device.readings is None:
            error = device.handle_error
            detail = _error(error) if error is not None else "no handle"
            statuses["device_handle"] = FAIL
            out.problems.append(
                Problem(device.index, "device_handle", f"could not open GPU: {detail}")
            )
        else:
            statuses["device_handle"] = PASS
            for check, (status, problems) in (
                ("ecc_dbe", _check_ecc(device.index, device.readings)),
                ("retired_pages", _check_retired_pages(device.index, device.readings)),
                ("row_remap", _check_row_remap(device.index, device.readings)),
                (
                    "temperature",
                    _check_temperature(device.index, device.readings, expect.max_temperature_c),
                ),
                ("xid", _check_xid(device.index, watch)),
            ):
                statuses[check] = status
                out.problems += problems
        out.device_checks[device.index] = statuses
    out.problems += _node_xid_problems(watch)
    return out


Outcome = tuple[str, list[Problem]]


def _check_driver_version(reading: object, expected: str) -> list[Problem]:
    if isinstance(reading, Unavailable):
        return [Problem(None, "driver_version", f"could not read: {_error(reading)}")]
    if reading != expected:
        return [Problem(None, "driver_version", f"driver {reading} is loaded, expected {expected}")]
    return []


def _check_device_count(reading: object, expected: int) -> list[Problem]:
    if isinstance(reading, Unavailable):
        return [Problem(None, "device_count", f"could not read: {_error(reading)}")]
    if reading != expected:
        return [Problem(None, "device_count", f"found {reading} GPUs, expected {expected}")]
    return []


def _check_ecc(index: int, readings: DeviceReadings) -> Outcome:
    """No double-bit ECC error since the driver loaded (the volatile counter)."""
    mode = readings.ecc_mode
    if isinstance(mode, Unavailable):
        return _unreadable(index, "ecc_dbe", "ECC mode", mode)
    if not mode[0]:
        return "skipped: ECC disabled", []
    dbe = readings.ecc.volatile_double_bit
    if isinstance(dbe, Unavailable):
        return _unreadable(index, "ecc_dbe", "volatile double-bit ECC count", dbe)
    if dbe > 0:
        return FAIL, [
            Problem(
                index,
                "ecc_dbe",
                f"{dbe} volatile double-bit ECC error(s) since the driver loaded",
            )
        ]
    return PASS, []


def _check_retired_pages(index: int, readings: DeviceReadings) -> Outcome:
    """No page retirement waiting for a reset (GPUs before Ampere)."""
    pending = readings.retired_pages.pending
    if isinstance(pending, Unavailable):
        if pending.not_supported and not isinstance(readings.remapped_rows, Unavailable):
            return "not applicable: row remapping in use", []
        return _unreadable(index, "retired_pages", "retired-pages pending status", pending)
    if pending:
        return FAIL, [
            Problem(
                index,
                "retired_pages",
                "a page retirement is pending: the GPU needs a reset before it takes effect",
            )
        ]
    return PASS, []


def _check_row_remap(index: int, readings: DeviceReadings) -> Outcome:
    """No failed row remap and none waiting for a reset (Ampere and later)."""
    rows = readings.remapped_rows
    if isinstance(rows, Unavailable):
        if rows.not_supported and not isinstance(readings.retired_pages.pending, Unavailable):
            return "not applicable: page retirement in use", []
        return _unreadable(index, "row_remap", "remapped rows", rows)
    problems = []
    if rows.failure:
        problems.append(
            Problem(
                index,
                "row_remap",
                "row remapping failed: a bank has no spare row left for an uncorrectable error",
            )
        )
    if rows.pending:
        problems.append(
            Problem(
                index,
                "row_remap",
                "a row remap is pending: the GPU needs a reset before it takes effect",
            )
        )
    return (FAIL if problems else PASS), problems


def _check_temperature(index: int, readings: DeviceReadings, limit_c: int) -> Outcome:
    """GPU core temperature at or under the limit."""
    temperature = readings.temperature_c
    if isinstance(temperature, Unavailable):
        return _unreadable(index, "temperature", "GPU temperature", temperature)
    if temperature > limit_c:
        thresholds = ", ".join(
            f"{name} {value} C"
            for name, value in (
                ("slowdown", readings.slowdown_temperature_c),
                ("shutdown", readings.shutdown_temperature_c),
            )
            if not isinstance(value, Unavailable)
        )
        suffix = f" (GPU thresholds: {thresholds})" if thresholds else ""
        return FAIL, [
            Problem(index, "temperature", f"{temperature} C is over the {limit_c} C limit{suffix}")
        ]
    return PASS, []


def _check_xid(index: int, watch: XidWatch) -> Outcome:
    """No critical Xid event from this GPU while the check listened."""
    registration = watch.registration.get(index)
    if registration is not None:
        if watch.set_error is not None and not registration.not_supported:
            # Reported once for the node (see _node_xid_problems).
            return FAIL, []
        return _unreadable(index, "xid", "Xid event registration", registration)
    if index not in watch.registration:
        return "skipped: not watched", []
    critical = [e.xid for e in watch.events if e.device == index and e.xid in CRITICAL_XIDS]
    if critical:
        return FAIL, [
            Problem(index, "xid", f"critical {describe_xid(xid)} reported") for xid in critical
        ]
    if watch.wait_error is not None:
        return FAIL, []
    return PASS, []


def _node_xid_problems(watch: XidWatch) -> list[Problem]:
    problems = []
    if watch.set_error is not None and not watch.set_error.not_supported:
        problems.append(
            Problem(None, "xid", f"could not create an NVML event set: {_error(watch.set_error)}")
        )
    if watch.wait_error is not None:
        problems.append(
            Problem(None, "xid", f"waiting for Xid events failed: {_error(watch.wait_error)}")
        )
    problems += [
        Problem(None, "xid", f"critical {describe_xid(event.xid)} reported by an unidentified GPU")
        for event in watch.events
        if event.device is None and event.xid in CRITICAL_XIDS
    ]
    return problems


def _unreadable(index: int, check: str, what: str, reading: Unavailable) -> Outcome:
    """Not supported: no evidence, no problem. Any other error: the GPU did not answer."""
    if reading.not_supported:
        return NOT_SUPPORTED, []
    return FAIL, [Problem(index, check, f"could not read the {what}: {_error(reading)}")]


def _error(reading: Unavailable) -> str:
    return f"{reading.message} ({reading.error})"
