"""A fake `pynvml` for machines without a GPU.

`FakeNvml(node)` is a module object with pynvml's names: the functions the health check calls
(same names and parameters), the constants it reads and `NVMLError` with one subclass per
NVML_ERROR_* code, built the way pynvml builds them (`NVMLError(3)` is an
`NVMLError_NotSupported`). Values are copied from pynvml's source; test_fake_nvml.py checks every
constant, error class and function signature against the installed pynvml.

The node it answers for is plain data (`FakeNode` / `FakeGpu`, JSON round-trippable so a
subprocess can load the same scenario), built fluently:

    node = FakeNode.hgx(8).gpu(3, lambda g: g.with_volatile_dbe(2))
    nvml = FakeNvml(node)

A GPU field set to None means the GPU does not support that function (NVMLError_NotSupported);
`raises` maps an NVML function name to the error code it raises instead of answering.
"""

from __future__ import annotations

import dataclasses
import json
import string
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# --- constants (values as in pynvml) -------------------------------------------------------------

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_MEMORY = 20
NVML_ERROR_NO_DATA = 21
NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22
NVML_ERROR_INSUFFICIENT_RESOURCES = 23
NVML_ERROR_FREQ_NOT_SUPPORTED = 24
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_DEPRECATED = 26
NVML_ERROR_NOT_READY = 27
NVML_ERROR_GPU_NOT_FOUND = 28
NVML_ERROR_INVALID_STATE = 29
NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30
NVML_ERROR_UNKNOWN = 999

NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1

NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0
NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
NVML_TEMPERATURE_GPU = 0

NVML_SINGLE_BIT_ECC = 0
NVML_DOUBLE_BIT_ECC = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1

NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0
NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1

NVML_DEVICE_ARCH_KEPLER = 2
NVML_DEVICE_ARCH_MAXWELL = 3
NVML_DEVICE_ARCH_PASCAL = 4
NVML_DEVICE_ARCH_VOLTA = 5
NVML_DEVICE_ARCH_TURING = 6
NVML_DEVICE_ARCH_AMPERE = 7
NVML_DEVICE_ARCH_ADA = 8
NVML_DEVICE_ARCH_HOPPER = 9
NVML_DEVICE_ARCH_BLACKWELL = 10
NVML_DEVICE_ARCH_UNKNOWN = 0xFFFFFFFF

nvmlEventTypeSingleBitEccError = 0x0000000000000001
nvmlEventTypeDoubleBitEccError = 0x0000000000000002
nvmlEventTypePState = 0x0000000000000004
nvmlEventTypeXidCriticalError = 0x0000000000000008
nvmlEventTypeClock = 0x0000000000000010
nvmlEventTypeNone = 0x0000000000000000

nvmlClocksEventReasonGpuIdle = 0x0000000000000001
nvmlClocksEventReasonApplicationsClocksSetting = 0x0000000000000002
nvmlClocksEventReasonSwPowerCap = 0x0000000000000004
nvmlClocksEventReasonHwSlowdown = 0x0000000000000008
nvmlClocksEventReasonSyncBoost = 0x0000000000000010
nvmlClocksEventReasonSwThermalSlowdown = 0x0000000000000020
nvmlClocksEventReasonHwThermalSlowdown = 0x0000000000000040
nvmlClocksEventReasonHwPowerBrakeSlowdown = 0x0000000000000080
nvmlClocksEventReasonDisplayClockSetting = 0x0000000000000100
nvmlClocksEventReasonNone = 0x0000000000000000

nvmlClocksThrottleReasonGpuIdle = 0x0000000000000001
nvmlClocksThrottleReasonApplicationsClocksSetting = 0x0000000000000002
nvmlClocksThrottleReasonSwPowerCap = 0x0000000000000004
nvmlClocksThrottleReasonHwSlowdown = 0x0000000000000008
nvmlClocksThrottleReasonSyncBoost = 0x0000000000000010
nvmlClocksThrottleReasonSwThermalSlowdown = 0x0000000000000020
nvmlClocksThrottleReasonHwThermalSlowdown = 0x0000000000000040
nvmlClocksThrottleReasonHwPowerBrakeSlowdown = 0x0000000000000080
nvmlClocksThrottleReasonDisplayClockSetting = 0x0000000000000100
nvmlClocksThrottleReasonNone = 0x0000000000000000

# --- errors (built as pynvml builds them) --------------------------------------------------------


class NVMLError(Exception):
    _valClassMapping: dict[int, type[NVMLError]] = {}  # noqa: RUF012 (pynvml's own name and shape)
    _errcode_to_string = {  # noqa: RUF012
        NVML_ERROR_UNINITIALIZED: "Uninitialized",
        NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
        NVML_ERROR_NOT_SUPPORTED: "Not Supported",
        NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
        NVML_ERROR_ALREADY_INITIALIZED: "Already Initialized",
        NVML_ERROR_NOT_FOUND: "Not Found",
        NVML_ERROR_INSUFFICIENT_SIZE: "Insufficient Size",
        NVML_ERROR_INSUFFICIENT_POWER: "Insufficient External Power",
        NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
        NVML_ERROR_TIMEOUT: "Timeout",
        NVML_ERROR_IRQ_ISSUE: "Interrupt Request Issue",
        NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
        NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
        NVML_ERROR_CORRUPTED_INFOROM: "Corrupted infoROM",
        NVML_ERROR_GPU_IS_LOST: "GPU is lost",
        NVML_ERROR_RESET_REQUIRED: "GPU requires restart",
        NVML_ERROR_OPERATING_SYSTEM: "The operating system has blocked the request.",
        NVML_ERROR_LIB_RM_VERSION_MISMATCH: "RM has detected an NVML/RM version mismatch.",
        NVML_ERROR_MEMORY: "Insufficient Memory",
        NVML_ERROR_UNKNOWN: "Unknown Error",
    }
    value: int

    def __new__(cls, value: int) -> NVMLError:
        if cls is NVMLError:
            cls = NVMLError._valClassMapping.get(value, cls)
        obj = Exception.__new__(cls)
        obj.value = value
        return obj

    def __str__(self) -> str:
        # pynvml asks the loaded library for codes outside its table; without a library (as
        # with the real module before nvmlInit succeeds) it falls back to this text.
        return NVMLError._errcode_to_string.get(self.value, f"NVML Error with code {self.value}")

    def __eq__(self, other: object) -> bool:
        return self.value == getattr(other, "value", None)

    __hash__ = None  # type: ignore[assignment]  # as in pynvml, where __eq__ drops hashing


def _extract_errors_as_classes() -> None:
    """NVML_ERROR_ALREADY_INITIALIZED -> NVMLError_AlreadyInitialized, as pynvml names them."""
    module = sys.modules[__name__]
    for name in [n for n in dir(module) if n.startswith("NVML_ERROR_")]:
        class_name = "NVMLError_" + string.capwords(name.replace("NVML_ERROR_", ""), "_").replace(
            "_", ""
        )
        code = getattr(module, name)

        def new(cls: type[NVMLError], *args: Any, _code: int = code) -> NVMLError:
            obj = Exception.__new__(cls)
            obj.value = _code
            return obj

        error_class = type(class_name, (NVMLError,), {"__new__": new})
        error_class.__module__ = __name__
        setattr(module, class_name, error_class)
        NVMLError._valClassMapping[code] = error_class


_extract_errors_as_classes()

EXPORTED = {
    name: value
    for name, value in dict(globals()).items()
    if name.startswith(("NVML_", "nvmlEventType", "nvmlClocks", "NVMLError"))
}
"""Every constant and error class the fake module has, by name."""

# --- the node it answers for ---------------------------------------------------------------------

ECC_KEYS = {
    (NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC): "volatile_double_bit",
    (NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC): "volatile_single_bit",
    (NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC): "aggregate_double_bit",
    (NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC): "aggregate_single_bit",
}


@dataclass
class FakeGpu:
    """One GPU. None in a field: the GPU does not support the function that reads it."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    pci_bus_id: str = "00000000:18:00.0"
    architecture: int = NVML_DEVICE_ARCH_HOPPER
    ecc_mode: list[int] | None = field(default_factory=lambda: [1, 1])
    """[current, pending] NVML_FEATURE_*."""
    ecc_errors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ECC_KEYS.values(), 0))
    retired_pages: dict[str, list[int]] | None = None
    """{"double_bit": [addresses], "single_bit": [addresses]}."""
    retired_pages_pending: bool | None = None
    remapped_rows: list[int] | None = field(default_factory=lambda: [0, 0, 0, 0])
    """[corrected, uncorrected, pending, failure]."""
    temperature_c: int | None = 34
    slowdown_c: int | None = 90
    shutdown_c: int | None = 95
    power_usage_mw: int | None = 71_000
    power_limit_mw: int | None = 700_000
    utilization: list[int] | None = field(default_factory=lambda: [0, 0])
    clocks_event_reasons: int | None = nvmlClocksEventReasonGpuIdle
    xids: list[int] = field(default_factory=list)
    """Xid events this GPU raises while the check listens."""
    xid_events_supported: bool = True
    raises: dict[str, int] = field(default_factory=dict)
    """NVML function name -> error code it raises for this GPU."""

    # Presets -----------------------------------------------------------------------------------

    @classmethod
    def h100(cls, index: int) -> FakeGpu:
        return cls(uuid=_uuid(index), pci_bus_id=_bus_id(index))

    @classmethod
    def a100(cls, index: int) -> FakeGpu:
        return cls(
            name="NVIDIA A100-SXM4-40GB",
            uuid=_uuid(index),
            pci_bus_id=_bus_id(index),
            architecture=NVML_DEVICE_ARCH_AMPERE,
            power_limit_mw=400_000,
        )

    @classmethod
    def v100(cls, index: int) -> FakeGpu:
        """Volta: page retirement, no row remapping."""
        return cls(
            name="Tesla V100-SXM2-32GB",
            uuid=_uuid(index),
            pci_bus_id=_bus_id(index),
            architecture=NVML_DEVICE_ARCH_VOLTA,
            retired_pages={"double_bit": [], "single_bit": []},
            retired_pages_pending=False,
            remapped_rows=None,
            power_limit_mw=300_000,
        )

    @classmethod
    def rtx4090(cls, index: int) -> FakeGpu:
        """A consumer GPU: no ECC, no page retirement, no row remapping."""
        return cls(
            name="NVIDIA GeForce RTX 4090",
            uuid=_uuid(index),
            pci_bus_id=_bus_id(index),
            architecture=NVML_DEVICE_ARCH_ADA,
            ecc_mode=None,
            remapped_rows=None,
            power_limit_mw=450_000,
        )

    # Fluent changes ----------------------------------------------------------------------------

    def with_volatile_dbe(self, count: int) -> FakeGpu:
        self.ecc_errors["volatile_double_bit"] = count
        self.ecc_errors["aggregate_double_bit"] += count
        return self

    def with_xids(self, *xids: int) -> FakeGpu:
        self.xids.extend(xids)
        return self

    def raising(self, function: str, code: int) -> FakeGpu:
        self.raises[function] = code
        return self

    def not_supporting(self, *functions: str) -> FakeGpu:
        for function in functions:
            self.raises[function] = NVML_ERROR_NOT_SUPPORTED
        return self

    def change(self, **fields: Any) -> FakeGpu:
        for name, value in fields.items():
            if not hasattr(self, name):
                raise AttributeError(f"FakeGpu has no field {name}")
            setattr(self, name, value)
        return self


@dataclass
class FakeNode:
    driver_version: str = "570.124.06"
    cuda_driver_version: int = 12080
    gpus: list[FakeGpu] = field(default_factory=list)
    device_count: int | None = None
    """What nvmlDeviceGetCount says; None: the number of GPUs."""
    init_error: int | None = None
    """nvmlInit raises this NVML error code."""
    raises: dict[str, int] = field(default_factory=dict)
    """Node-level NVML function name -> error code it raises."""

    @classmethod
    def hgx(cls, count: int = 8, gpu: Callable[[int], FakeGpu] = FakeGpu.h100) -> FakeNode:
        """A node with `count` identical GPUs (H100 unless another preset is given)."""
        return cls(gpus=[gpu(index) for index in range(count)])

    def gpu(self, index: int, change: Callable[[FakeGpu], FakeGpu]) -> FakeNode:
        change(self.gpus[index])
        return self

    def with_driver(self, version: str) -> FakeNode:
        self.driver_version = version
        return self

    def without_nvml(self, code: int) -> FakeNode:
        self.init_error = code
        return self

    def raising(self, function: str, code: int) -> FakeNode:
        self.raises[function] = code
        return self

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> FakeNode:
        data = json.loads(text)
        data["gpus"] = [FakeGpu(**gpu) for gpu in data.get("gpus", [])]
        return cls(**data)


def _uuid(index: int) -> str:
    return f"GPU-6b1f0c3a-{index:04x}-4e2a-9c1d-5f0e8a7b{index:04x}"


def _bus_id(index: int) -> str:
    return f"00000000:{0x18 + 0x10 * index:02X}:00.0"


# --- the module ----------------------------------------------------------------------------------


@dataclass
class FakeHandle:
    index: int


# Field names below are pynvml's (ctypes structure fields).


@dataclass
class FakePciInfo:
    busId: str
    busIdLegacy: str


@dataclass
class FakeUtilization:
    gpu: int
    memory: int


@dataclass
class FakeEventData:
    device: FakeHandle
    eventType: int
    eventData: int
    gpuInstanceId: int = 0xFFFFFFFF
    computeInstanceId: int = 0xFFFFFFFF


@dataclass
class FakeEventSet:
    queue: list[FakeEventData] = field(default_factory=list)
    freed: bool = False


class FakeNvml(types.ModuleType):
    """A pynvml stand-in answering for one `FakeNode`. `calls` records every NVML function
    called, in order; `wait_timeouts_ms` the timeouts passed to nvmlEventSetWait_v2."""

    def __init__(self, node: FakeNode) -> None:
        super().__init__("pynvml", "fake pynvml (tests/health/fake_nvml.py)")
        self.node = node
        self.calls: list[str] = []
        self.initialized = 0
        self.event_sets: list[FakeEventSet] = []
        self.wait_timeouts_ms: list[int] = []

    def __getattr__(self, name: str) -> Any:
        try:
            return EXPORTED[name]
        except KeyError:
            raise AttributeError(f"fake pynvml has no attribute {name!r}") from None

    # plumbing ----------------------------------------------------------------------------------

    def _enter(self, function: str, handle: FakeHandle | None = None) -> FakeGpu | None:
        self.calls.append(function)
        if not self.initialized:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        if function in self.node.raises:
            raise NVMLError(self.node.raises[function])
        if handle is None:
            return None
        gpu = self.node.gpus[handle.index]
        if function in gpu.raises:
            raise NVMLError(gpu.raises[function])
        return gpu

    def _gpu(self, function: str, handle: FakeHandle) -> FakeGpu:
        gpu = self._enter(function, handle)
        assert gpu is not None
        return gpu

    @staticmethod
    def _supported(value: Any) -> Any:
        if value is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return value

    # library -----------------------------------------------------------------------------------

    def nvmlInit(self) -> None:
        self.calls.append("nvmlInit")
        if self.node.init_error is not None:
            raise NVMLError(self.node.init_error)
        self.initialized += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.initialized -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return self.node.driver_version

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion_v2")
        return self.node.cuda_driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        count = self.node.device_count
        return len(self.node.gpus) if count is None else count

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.node.gpus):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        code = self.node.gpus[index].raises.get("nvmlDeviceGetHandleByIndex")
        if code is not None:
            raise NVMLError(code)
        return FakeHandle(index)

    # device ------------------------------------------------------------------------------------

    def nvmlDeviceGetIndex(self, handle: FakeHandle) -> int:
        self._gpu("nvmlDeviceGetIndex", handle)
        return handle.index

    def nvmlDeviceGetName(self, handle: FakeHandle) -> str:
        return self._gpu("nvmlDeviceGetName", handle).name

    def nvmlDeviceGetUUID(self, handle: FakeHandle) -> str:
        return self._gpu("nvmlDeviceGetUUID", handle).uuid

    def nvmlDeviceGetPciInfo(self, handle: FakeHandle) -> FakePciInfo:
        bus_id = self._gpu("nvmlDeviceGetPciInfo", handle).pci_bus_id
        return FakePciInfo(busId=bus_id, busIdLegacy=bus_id[4:])

    def nvmlDeviceGetPciInfo_v3(self, handle: FakeHandle) -> FakePciInfo:
        return self.nvmlDeviceGetPciInfo(handle)

    def nvmlDeviceGetArchitecture(self, device: FakeHandle) -> int:
        return self._gpu("nvmlDeviceGetArchitecture", device).architecture

    def nvmlDeviceGetEccMode(self, handle: FakeHandle) -> list[int]:
        return list(self._supported(self._gpu("nvmlDeviceGetEccMode", handle).ecc_mode))

    def nvmlDeviceGetTotalEccErrors(
        self, handle: FakeHandle, errorType: int, counterType: int
    ) -> int:
        gpu = self._gpu("nvmlDeviceGetTotalEccErrors", handle)
        # Counters exist only while ECC is supported and enabled.
        if gpu.ecc_mode is None or gpu.ecc_mode[0] != NVML_FEATURE_ENABLED:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        key = ECC_KEYS.get((errorType, counterType))
        if key is None:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return gpu.ecc_errors[key]

    def nvmlDeviceGetRetiredPages(self, device: FakeHandle, sourceFilter: int) -> list[int]:
        pages = self._supported(self._gpu("nvmlDeviceGetRetiredPages", device).retired_pages)
        if sourceFilter == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR:
            return list(pages["double_bit"])
        if sourceFilter == NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS:
            return list(pages["single_bit"])
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetRetiredPagesPendingStatus(self, device: FakeHandle) -> int:
        gpu = self._gpu("nvmlDeviceGetRetiredPagesPendingStatus", device)
        return int(self._supported(gpu.retired_pages_pending))

    def nvmlDeviceGetRemappedRows(self, device: FakeHandle) -> tuple[int, int, int, int]:
        rows = self._supported(self._gpu("nvmlDeviceGetRemappedRows", device).remapped_rows)
        corrected, uncorrected, pending, failure = rows
        return (corrected, uncorrected, pending, failure)

    def nvmlDeviceGetTemperature(self, handle: FakeHandle, sensor: int) -> int:
        gpu = self._gpu("nvmlDeviceGetTemperature", handle)
        if sensor != NVML_TEMPERATURE_GPU:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return int(self._supported(gpu.temperature_c))

    def nvmlDeviceGetTemperatureThreshold(self, handle: FakeHandle, threshold: int) -> int:
        gpu = self._gpu("nvmlDeviceGetTemperatureThreshold", handle)
        if threshold == NVML_TEMPERATURE_THRESHOLD_SLOWDOWN:
            return int(self._supported(gpu.slowdown_c))
        if threshold == NVML_TEMPERATURE_THRESHOLD_SHUTDOWN:
            return int(self._supported(gpu.shutdown_c))
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetPowerUsage(self, handle: FakeHandle) -> int:
        return int(self._supported(self._gpu("nvmlDeviceGetPowerUsage", handle).power_usage_mw))

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: FakeHandle) -> int:
        gpu = self._gpu("nvmlDeviceGetEnforcedPowerLimit", handle)
        return int(self._supported(gpu.power_limit_mw))

    def nvmlDeviceGetUtilizationRates(self, handle: FakeHandle) -> FakeUtilization:
        gpu = self._gpu("nvmlDeviceGetUtilizationRates", handle)
        gpu_percent, memory_percent = self._supported(gpu.utilization)
        return FakeUtilization(gpu=gpu_percent, memory=memory_percent)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: FakeHandle) -> int:
        gpu = self._gpu("nvmlDeviceGetCurrentClocksEventReasons", handle)
        return int(self._supported(gpu.clocks_event_reasons))

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: FakeHandle) -> int:
        gpu = self._gpu("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        return int(self._supported(gpu.clocks_event_reasons))

    # events ------------------------------------------------------------------------------------

    def nvmlEventSetCreate(self) -> FakeEventSet:
        self._enter("nvmlEventSetCreate")
        event_set = FakeEventSet()
        self.event_sets.append(event_set)
        return event_set

    def nvmlDeviceRegisterEvents(
        self, handle: FakeHandle, eventTypes: int, eventSet: FakeEventSet
    ) -> None:
        gpu = self._gpu("nvmlDeviceRegisterEvents", handle)
        if not gpu.xid_events_supported:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if eventTypes & nvmlEventTypeXidCriticalError:
            eventSet.queue += [
                FakeEventData(handle, nvmlEventTypeXidCriticalError, xid) for xid in gpu.xids
            ]

    def nvmlEventSetWait_v2(self, eventSet: FakeEventSet, timeoutms: int) -> FakeEventData:
        self._enter("nvmlEventSetWait_v2")
        self.wait_timeouts_ms.append(timeoutms)
        if eventSet.freed:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        if not eventSet.queue:
            # The real call blocks up to timeoutms first; the fake answers at once.
            raise NVMLError(NVML_ERROR_TIMEOUT)
        return eventSet.queue.pop(0)

    def nvmlEventSetWait(self, eventSet: FakeEventSet, timeoutms: int) -> FakeEventData:
        return self.nvmlEventSetWait_v2(eventSet, timeoutms)

    def nvmlEventSetFree(self, eventSet: FakeEventSet) -> None:
        self._enter("nvmlEventSetFree")
        eventSet.freed = True
