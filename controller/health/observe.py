"""Read a node's GPUs through NVML into a snapshot. No judgement here (see judge.py).

Every NVML call goes through the injected binding (`nvml`: the `pynvml` module in production, a
fake with the same function names, constants and error classes in tests). A call that raises an
`NVMLError` becomes an `Unavailable` reading that keeps the error's class, code and message, so a
function the GPU does not support (`NVMLError_NotSupported`) stays distinguishable from a GPU that
failed to answer, and neither can be mistaken for a value.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

Nvml = Any
"""The NVML binding: the `pynvml` module, or any object with its names (functions, constants,
`NVMLError` and its per-code subclasses)."""

NOT_SUPPORTED = "not supported"

MAX_XID_EVENTS = 256
"""Events read per check at most, so an event storm cannot keep the check waiting."""

T = TypeVar("T")


@dataclass(frozen=True)
class Unavailable:
    """A reading NVML did not give."""

    error: str
    """The NVML error class, e.g. `NVMLError_NotSupported`."""
    code: int | None
    """NVML's return code (NVML_ERROR_*)."""
    message: str
    """NVML's message for the code."""
    not_supported: bool
    """The GPU (or driver) does not offer this function: not a fault, and not evidence either."""

    def describe(self) -> str:
        """`not supported`, or `error: <message> (<class>)`."""
        if self.not_supported:
            return NOT_SUPPORTED
        return f"error: {self.message} ({self.error})"


Reading: TypeAlias = T | Unavailable
"""A value read from NVML, or why there is none."""


def unavailable(nvml: Nvml, err: BaseException) -> Unavailable:
    """The `Unavailable` for an `NVMLError` raised by `nvml`."""
    code = getattr(err, "value", None)
    try:
        message = str(err)
    except Exception:  # str() of an unknown code asks the library, which may be gone
        message = f"NVML error {code}"
    return Unavailable(
        error=type(err).__name__,
        code=code if isinstance(code, int) else None,
        message=message,
        not_supported=isinstance(err, nvml.NVMLError_NotSupported),
    )


@dataclass(frozen=True)
class EccCounters:
    """ECC error counts from nvmlDeviceGetTotalEccErrors. Volatile counts start at zero when the
    driver loads; aggregate counts persist across driver loads (kept in the infoROM). NVML's
    "uncorrected" memory errors are the double-bit ECC errors and "corrected" the single-bit ones.
    """

    volatile_double_bit: Reading[int]
    volatile_single_bit: Reading[int]
    aggregate_double_bit: Reading[int]
    aggregate_single_bit: Reading[int]


@dataclass(frozen=True)
class RetiredPages:
    """Dynamic page retirement (GPUs before Ampere)."""

    double_bit: Reading[int]
    """Pages retired for a double-bit error (count)."""
    single_bit: Reading[int]
    """Pages retired for repeated single-bit errors (count)."""
    pending: Reading[bool]
    """A retirement waits for the next driver load or GPU reset."""


@dataclass(frozen=True)
class RemappedRows:
    """Row remapping (Ampere and later), from nvmlDeviceGetRemappedRows."""

    corrected: int
    """Rows remapped for correctable errors."""
    uncorrected: int
    """Rows remapped for uncorrectable errors."""
    pending: bool
    """A remap waits for the next GPU reset."""
    failure: bool
    """A remap could not be done (no spare row left in the bank)."""


@dataclass(frozen=True)
class DeviceReadings:
    """Everything read from one GPU whose handle opened."""

    name: Reading[str]
    uuid: Reading[str]
    pci_bus_id: Reading[str]
    architecture: Reading[int]
    ecc_mode: Reading[tuple[bool, bool]]
    """(enabled now, enabled after the next reboot)."""
    ecc: EccCounters
    retired_pages: RetiredPages
    remapped_rows: Reading[RemappedRows]
    temperature_c: Reading[int]
    slowdown_temperature_c: Reading[int]
    shutdown_temperature_c: Reading[int]
    power_usage_mw: Reading[int]
    power_limit_mw: Reading[int]
    utilization: Reading[tuple[int, int]]
    """(GPU percent, memory percent) over the driver's last sample period."""
    clocks_event_reasons: Reading[int]
    """Bit mask of nvmlClocksEventReason* (nvmlClocksThrottleReason* on older bindings)."""


@dataclass(frozen=True)
class DeviceSnapshot:
    index: int
    handle_error: Unavailable | None
    """Why nvmlDeviceGetHandleByIndex failed; None when the handle opened."""
    readings: DeviceReadings | None
    """None exactly when the handle did not open."""


@dataclass(frozen=True)
class XidEvent:
    device: int | None
    """NVML index of the GPU, None when the event's device could not be identified."""
    xid: int


@dataclass(frozen=True)
class XidWatch:
    """Xid events seen while registered for nvmlEventTypeXidCriticalError."""

    wait_ms: int
    """How long the watch waited for events."""
    registration: dict[int, Unavailable | None] = field(default_factory=dict)
    """Per device index: None when registered, otherwise why not."""
    events: list[XidEvent] = field(default_factory=list)
    set_error: Unavailable | None = None
    """nvmlEventSetCreate failed: no device could be watched."""
    wait_error: Unavailable | None = None
    """nvmlEventSetWait_v2 failed with something other than a timeout."""


@dataclass(frozen=True)
class NodeSnapshot:
    init_error: Unavailable | None
    """nvmlInit failed: nothing else was read."""
    driver_version: Reading[str] | None = None
    cuda_driver_version: Reading[int] | None = None
    """As NVML encodes it: 1000 * major + 10 * minor (12080 is CUDA 12.8)."""
    device_count: Reading[int] | None = None
    devices: list[DeviceSnapshot] = field(default_factory=list)
    xid_watch: XidWatch | None = None


class _Reader:
    """Calls NVML functions by name, turning an NVMLError into an Unavailable reading."""

    def __init__(self, nvml: Nvml) -> None:
        self.nvml = nvml

    def __call__(self, function: str, *args: Any) -> Any:
        try:
            return getattr(self.nvml, function)(*args)
        except self.nvml.NVMLError as err:
            return unavailable(self.nvml, err)


def observe(
    nvml: Nvml, *, xid_wait_seconds: float, clock: Callable[[], float] = time.monotonic
) -> NodeSnapshot:
    """Initialise NVML, read the node and every GPU, watch for Xid events for
    `xid_wait_seconds`, and shut NVML down again."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        return NodeSnapshot(init_error=unavailable(nvml, err))
    try:
        read = _Reader(nvml)
        driver_version = read("nvmlSystemGetDriverVersion")
        cuda_driver_version = read("nvmlSystemGetCudaDriverVersion_v2")
        device_count = read("nvmlDeviceGetCount")
        devices: list[DeviceSnapshot] = []
        handles: dict[int, Any] = {}
        if not isinstance(device_count, Unavailable):
            for index in range(device_count):
                handle = read("nvmlDeviceGetHandleByIndex", index)
                if isinstance(handle, Unavailable):
                    devices.append(DeviceSnapshot(index, handle_error=handle, readings=None))
                    continue
                handles[index] = handle
                devices.append(
                    DeviceSnapshot(index, handle_error=None, readings=_read_device(nvml, handle))
                )
        xid_watch = _watch_xids(nvml, handles, wait_seconds=xid_wait_seconds, clock=clock)
        return NodeSnapshot(
            init_error=None,
            driver_version=driver_version,
            cuda_driver_version=cuda_driver_version,
            device_count=device_count,
            devices=devices,
            xid_watch=xid_watch,
        )
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()


def _read_device(nvml: Nvml, handle: Any) -> DeviceReadings:
    read = _Reader(nvml)
    pci = read("nvmlDeviceGetPciInfo", handle)
    ecc_mode = read("nvmlDeviceGetEccMode", handle)
    remapped = read("nvmlDeviceGetRemappedRows", handle)
    pending = read("nvmlDeviceGetRetiredPagesPendingStatus", handle)
    utilization = read("nvmlDeviceGetUtilizationRates", handle)

    def ecc_count(error_type: int, counter_type: int) -> Reading[int]:
        count = read("nvmlDeviceGetTotalEccErrors", handle, error_type, counter_type)
        return count if isinstance(count, Unavailable) else int(count)

    def retired_count(cause: int) -> Reading[int]:
        pages = read("nvmlDeviceGetRetiredPages", handle, cause)
        return pages if isinstance(pages, Unavailable) else len(pages)

    uncorrected, corrected = (
        nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
        nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED,
    )
    return DeviceReadings(
        name=read("nvmlDeviceGetName", handle),
        uuid=read("nvmlDeviceGetUUID", handle),
        pci_bus_id=pci if isinstance(pci, Unavailable) else _text(pci.busId),
        architecture=read("nvmlDeviceGetArchitecture", handle),
        ecc_mode=(
            ecc_mode
            if isinstance(ecc_mode, Unavailable)
            else (
                ecc_mode[0] == nvml.NVML_FEATURE_ENABLED,
                ecc_mode[1] == nvml.NVML_FEATURE_ENABLED,
            )
        ),
        ecc=EccCounters(
            volatile_double_bit=ecc_count(uncorrected, nvml.NVML_VOLATILE_ECC),
            volatile_single_bit=ecc_count(corrected, nvml.NVML_VOLATILE_ECC),
            aggregate_double_bit=ecc_count(uncorrected, nvml.NVML_AGGREGATE_ECC),
            aggregate_single_bit=ecc_count(corrected, nvml.NVML_AGGREGATE_ECC),
        ),
        retired_pages=RetiredPages(
            double_bit=retired_count(nvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR),
            single_bit=retired_count(
                nvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
            ),
            pending=(
                pending
                if isinstance(pending, Unavailable)
                else int(pending) == nvml.NVML_FEATURE_ENABLED
            ),
        ),
        remapped_rows=(
            remapped
            if isinstance(remapped, Unavailable)
            else RemappedRows(
                corrected=int(remapped[0]),
                uncorrected=int(remapped[1]),
                pending=bool(remapped[2]),
                failure=bool(remapped[3]),
            )
        ),
        temperature_c=read("nvmlDeviceGetTemperature", handle, nvml.NVML_TEMPERATURE_GPU),
        slowdown_temperature_c=read(
            "nvmlDeviceGetTemperatureThreshold", handle, nvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
        ),
        shutdown_temperature_c=read(
            "nvmlDeviceGetTemperatureThreshold", handle, nvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN
        ),
        power_usage_mw=read("nvmlDeviceGetPowerUsage", handle),
        power_limit_mw=read("nvmlDeviceGetEnforcedPowerLimit", handle),
        utilization=(
            utilization
            if isinstance(utilization, Unavailable)
            else (int(utilization.gpu), int(utilization.memory))
        ),
        clocks_event_reasons=_clocks_event_reasons(nvml, handle),
    )


def _clocks_event_reasons(nvml: Nvml, handle: Any) -> Reading[int]:
    """nvmlDeviceGetCurrentClocksEventReasons, or the older name for the same mask when the
    binding or the driver does not have the new one."""
    read = _Reader(nvml)
    if hasattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons"):
        reasons = read("nvmlDeviceGetCurrentClocksEventReasons", handle)
        if not (isinstance(reasons, Unavailable) and reasons.error == "NVMLError_FunctionNotFound"):
            return reasons
    return read("nvmlDeviceGetCurrentClocksThrottleReasons", handle)


def _watch_xids(
    nvml: Nvml, handles: dict[int, Any], *, wait_seconds: float, clock: Callable[[], float]
) -> XidWatch:
    """Register every opened GPU for Xid events and collect what arrives within `wait_seconds`.

    NVML delivers only events raised after registration: this catches a GPU that is failing
    now (an Xid storm, a GPU falling off the bus), not one that failed before the check started;
    what an earlier failure leaves behind is read by the ECC, retired-page and row-remap checks.
    """
    wait_ms = max(0, round(wait_seconds * 1000))
    if not handles:
        return XidWatch(wait_ms=0)
    read = _Reader(nvml)
    event_set = read("nvmlEventSetCreate")
    if isinstance(event_set, Unavailable):
        return XidWatch(
            wait_ms=0,
            registration=dict.fromkeys(handles, event_set),
            set_error=event_set,
        )
    registration: dict[int, Unavailable | None] = {}
    events: list[XidEvent] = []
    wait_error: Unavailable | None = None
    try:
        for index, handle in handles.items():
            registered = read(
                "nvmlDeviceRegisterEvents", handle, nvml.nvmlEventTypeXidCriticalError, event_set
            )
            registration[index] = registered if isinstance(registered, Unavailable) else None
        if any(outcome is None for outcome in registration.values()):
            deadline = clock() + wait_ms / 1000
            while len(events) < MAX_XID_EVENTS:
                timeout_ms = max(0, round((deadline - clock()) * 1000))
                try:
                    data = nvml.nvmlEventSetWait_v2(event_set, timeout_ms)
                except nvml.NVMLError_Timeout:
                    break
                except nvml.NVMLError as err:
                    wait_error = unavailable(nvml, err)
                    break
                if int(data.eventType) & nvml.nvmlEventTypeXidCriticalError:
                    device = read("nvmlDeviceGetIndex", data.device)
                    events.append(
                        XidEvent(
                            device=None if isinstance(device, Unavailable) else int(device),
                            xid=int(data.eventData),
                        )
                    )
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlEventSetFree(event_set)
    return XidWatch(
        wait_ms=wait_ms, registration=registration, events=events, wait_error=wait_error
    )


def _text(value: str | bytes) -> str:
    """Older bindings return C strings as bytes."""
    return value.decode() if isinstance(value, bytes) else value
