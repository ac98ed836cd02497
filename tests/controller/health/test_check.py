"""The health check against a fake NVML: one table of node scenarios (want/got on the verdict's
status and problems), then the verdict's details and NVML hygiene."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from controller.health import Expectations, Verdict, check_node
from controller.health import cli as health_cli
from controller.health.observe import MAX_XID_EVENTS, Nvml
from fleetplane.cli import build_parser
from tests.controller.health.fake_nvml import (
    NVML_ERROR_DRIVER_NOT_LOADED,
    NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_UNKNOWN,
    FakeGpu,
    FakeNode,
    FakeNvml,
)


def main(argv: list[str], *, nvml: Nvml | None = None) -> int:
    """`fleetplane health ARGV` in this process, with `nvml` in place of the pynvml binding."""
    return health_cli.run(build_parser().parse_args(["health", *argv]), nvml=nvml)


EXPECT = Expectations(driver_version="570.124.06", gpu_count=8, xid_wait_seconds=0.5)


def run(node: FakeNode, expect: Expectations = EXPECT) -> tuple[Verdict, FakeNvml]:
    nvml = FakeNvml(node)
    return check_node(expect, node="gpu-node-0", nvml=nvml), nvml


def problems_of(verdict: Verdict) -> list[tuple[int | None, str]]:
    return [(p["device"], p["check"]) for p in verdict.document["problems"]]


@dataclass
class Case:
    name: str
    node: Callable[[], FakeNode]
    want_status: str
    want_problems: list[tuple[int | None, str]] = field(default_factory=list)
    expect: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case("healthy 8x H100", lambda: FakeNode.hgx(8), "healthy"),
    Case(
        "volatile double-bit ECC error",
        lambda: FakeNode.hgx(8).gpu(5, lambda g: g.with_volatile_dbe(2)),
        "unhealthy",
        [(5, "ecc_dbe")],
    ),
    Case(
        "aggregate double-bit errors from before the driver load only",
        lambda: FakeNode.hgx(8).gpu(5, lambda g: g.change(ecc_errors=_ecc(aggregate_dbe=3))),
        "healthy",
    ),
    Case("7 GPUs of 8", lambda: FakeNode.hgx(7), "unhealthy", [(None, "device_count")]),
    Case("9 GPUs of 8", lambda: FakeNode.hgx(9), "unhealthy", [(None, "device_count")]),
    Case(
        "a handle that fails to open",
        lambda: FakeNode.hgx(8).gpu(
            2, lambda g: g.raising("nvmlDeviceGetHandleByIndex", NVML_ERROR_GPU_IS_LOST)
        ),
        "unhealthy",
        [(2, "device_handle")],
    ),
    Case(
        "NVML library not found",
        lambda: FakeNode.hgx(8).without_nvml(NVML_ERROR_LIBRARY_NOT_FOUND),
        "unavailable",
        [(None, "nvml")],
    ),
    Case(
        "driver not loaded",
        lambda: FakeNode.hgx(8).without_nvml(NVML_ERROR_DRIVER_NOT_LOADED),
        "unavailable",
        [(None, "nvml")],
    ),
    Case(
        "NVML library and kernel module of different versions",
        lambda: FakeNode.hgx(8).without_nvml(NVML_ERROR_LIB_RM_VERSION_MISMATCH),
        "unavailable",
        [(None, "nvml")],
    ),
    Case(
        "driver version mismatch",
        lambda: FakeNode.hgx(8).with_driver("550.144.03"),
        "unhealthy",
        [(None, "driver_version")],
    ),
    Case(
        "driver version unreadable",
        lambda: FakeNode.hgx(8).raising("nvmlSystemGetDriverVersion", NVML_ERROR_UNKNOWN),
        "unhealthy",
        [(None, "driver_version")],
    ),
    Case(
        "device count unreadable",
        lambda: FakeNode.hgx(8).raising("nvmlDeviceGetCount", NVML_ERROR_UNKNOWN),
        "unhealthy",
        [(None, "device_count")],
    ),
    Case("healthy 8x V100 (page retirement)", lambda: FakeNode.hgx(8, FakeGpu.v100), "healthy"),
    Case(
        "pending retired pages",
        lambda: FakeNode.hgx(8, FakeGpu.v100).gpu(
            1,
            lambda g: g.change(
                retired_pages={"double_bit": [0x1F000], "single_bit": []},
                retired_pages_pending=True,
            ),
        ),
        "unhealthy",
        [(1, "retired_pages")],
    ),
    Case("healthy 8x A100 (row remapping)", lambda: FakeNode.hgx(8, FakeGpu.a100), "healthy"),
    Case(
        "row remap failure",
        lambda: FakeNode.hgx(8, FakeGpu.a100).gpu(
            0, lambda g: g.change(remapped_rows=[0, 1, 0, 1])
        ),
        "unhealthy",
        [(0, "row_remap")],
    ),
    Case(
        "row remap pending",
        lambda: FakeNode.hgx(8, FakeGpu.a100).gpu(
            7, lambda g: g.change(remapped_rows=[2, 0, 1, 0])
        ),
        "unhealthy",
        [(7, "row_remap")],
    ),
    Case(
        "row remap failure and pending",
        lambda: FakeNode.hgx(8, FakeGpu.a100).gpu(
            7, lambda g: g.change(remapped_rows=[0, 1, 1, 1])
        ),
        "unhealthy",
        [(7, "row_remap"), (7, "row_remap")],
    ),
    Case(
        "corrected rows remapped earlier, nothing pending",
        lambda: FakeNode.hgx(8, FakeGpu.a100).gpu(
            3, lambda g: g.change(remapped_rows=[4, 1, 0, 0])
        ),
        "healthy",
    ),
    Case(
        "critical Xid 79 (fell off the bus)",
        lambda: FakeNode.hgx(8).gpu(4, lambda g: g.with_xids(79)),
        "unhealthy",
        [(4, "xid")],
    ),
    Case(
        "critical Xids 48 and 94",
        lambda: FakeNode.hgx(8).gpu(0, lambda g: g.with_xids(48, 94)),
        "unhealthy",
        [(0, "xid"), (0, "xid")],
    ),
    Case(
        "application Xid 13 only",
        lambda: FakeNode.hgx(8).gpu(4, lambda g: g.with_xids(13)),
        "healthy",
    ),
    Case(
        "critical Xid from a GPU NVML cannot identify",
        lambda: FakeNode.hgx(8).gpu(
            6, lambda g: g.with_xids(79).raising("nvmlDeviceGetIndex", NVML_ERROR_GPU_IS_LOST)
        ),
        "unhealthy",
        [(None, "xid")],
    ),
    Case(
        "waiting for Xid events fails",
        lambda: FakeNode.hgx(8).raising("nvmlEventSetWait_v2", NVML_ERROR_GPU_IS_LOST),
        "unhealthy",
        [(None, "xid")],
    ),
    Case(
        "event set cannot be created",
        lambda: FakeNode.hgx(8).raising("nvmlEventSetCreate", NVML_ERROR_UNKNOWN),
        "unhealthy",
        [(None, "xid")],
    ),
    Case(
        "over temperature",
        lambda: FakeNode.hgx(8).gpu(6, lambda g: g.change(temperature_c=91)),
        "unhealthy",
        [(6, "temperature")],
    ),
    Case(
        "at the temperature limit",
        lambda: FakeNode.hgx(8).gpu(6, lambda g: g.change(temperature_c=85)),
        "healthy",
    ),
    Case(
        "91 C under a 95 C limit",
        lambda: FakeNode.hgx(8).gpu(6, lambda g: g.change(temperature_c=91)),
        "healthy",
        expect={"max_temperature_c": 95},
    ),
    Case(
        "temperature unreadable",
        lambda: FakeNode.hgx(8).gpu(
            3, lambda g: g.raising("nvmlDeviceGetTemperature", NVML_ERROR_GPU_IS_LOST)
        ),
        "unhealthy",
        [(3, "temperature")],
    ),
    Case(
        "ECC counter unreadable",
        lambda: FakeNode.hgx(8).gpu(
            0, lambda g: g.raising("nvmlDeviceGetTotalEccErrors", NVML_ERROR_UNKNOWN)
        ),
        "unhealthy",
        [(0, "ecc_dbe")],
    ),
    Case(
        "remapped rows unreadable",
        lambda: FakeNode.hgx(8).gpu(
            0, lambda g: g.raising("nvmlDeviceGetRemappedRows", NVML_ERROR_UNKNOWN)
        ),
        "unhealthy",
        [(0, "row_remap")],
    ),
    # NotSupported: no evidence either way, never a failure.
    Case("consumer GPUs without ECC", lambda: FakeNode.hgx(8, FakeGpu.rtx4090), "healthy"),
    Case(
        "ECC disabled",
        lambda: FakeNode.hgx(8).gpu(2, lambda g: g.change(ecc_mode=[0, 0])),
        "healthy",
    ),
    Case(
        "temperature not supported",
        lambda: FakeNode.hgx(8).gpu(3, lambda g: g.change(temperature_c=None)),
        "healthy",
    ),
    Case(
        "Xid events not supported on one GPU",
        lambda: FakeNode.hgx(8).gpu(3, lambda g: g.change(xid_events_supported=False)),
        "healthy",
    ),
    Case(
        "Xid events not supported at all",
        lambda: FakeNode.hgx(8).raising("nvmlEventSetCreate", NVML_ERROR_NOT_SUPPORTED),
        "healthy",
    ),
    Case(
        "informational readings not supported",
        lambda: FakeNode.hgx(8).gpu(
            1,
            lambda g: g.not_supporting(
                "nvmlDeviceGetPowerUsage",
                "nvmlDeviceGetEnforcedPowerLimit",
                "nvmlDeviceGetUtilizationRates",
                "nvmlDeviceGetCurrentClocksEventReasons",
                "nvmlDeviceGetTemperatureThreshold",
                "nvmlSystemGetCudaDriverVersion_v2",
            ),
        ),
        "healthy",
    ),
    Case(
        "everything at once",
        lambda: (
            FakeNode.hgx(7, FakeGpu.a100)
            .with_driver("550.144.03")
            .gpu(1, lambda g: g.with_volatile_dbe(1).with_xids(48))
            .gpu(2, lambda g: g.change(remapped_rows=[0, 0, 0, 1], temperature_c=99))
        ),
        "unhealthy",
        [
            (None, "driver_version"),
            (None, "device_count"),
            (1, "ecc_dbe"),
            (1, "xid"),
            (2, "row_remap"),
            (2, "temperature"),
        ],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_scenarios(case: Case) -> None:
    verdict, nvml = run(case.node(), replace(EXPECT, **case.expect))
    got = (verdict.status, sorted(problems_of(verdict), key=repr))
    want = (case.want_status, sorted(case.want_problems, key=repr))
    assert got == want, json.dumps(verdict.document["problems"], indent=2)
    assert verdict.healthy is (case.want_status == "healthy")
    assert verdict.exit_code == {"healthy": 0, "unhealthy": 1, "unavailable": 2}[case.want_status]
    json.dumps(verdict.document)  # serialisable as it stands
    assert nvml.initialized == 0, "nvmlShutdown after every successful nvmlInit"
    assert all(s.freed for s in nvml.event_sets), "every event set freed"


def _ecc(*, aggregate_dbe: int = 0) -> dict[str, int]:
    return {
        "volatile_double_bit": 0,
        "volatile_single_bit": 0,
        "aggregate_double_bit": aggregate_dbe,
        "aggregate_single_bit": 0,
    }


def test_healthy_verdict_document() -> None:
    verdict, nvml = run(FakeNode.hgx(8))
    doc = verdict.document
    assert {k: doc[k] for k in ("healthy", "status", "node", "driver_version")} == {
        "healthy": True,
        "status": "healthy",
        "node": "gpu-node-0",
        "driver_version": "570.124.06",
    }
    assert doc["cuda_driver_version"] == "12.8"
    assert doc["device_count"] == 8
    assert doc["expected"] == {
        "driver_version": "570.124.06",
        "gpu_count": 8,
        "max_temperature_c": 85,
        "xid_wait_seconds": 0.5,
        "critical_xids": [48, 63, 64, 74, 79, 92, 94, 95, 119, 120],
    }
    assert doc["problems"] == []
    assert [d["index"] for d in doc["devices"]] == list(range(8))
    assert doc["devices"][3] == {
        "index": 3,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": nvml.node.gpus[3].uuid,
        "pci_bus_id": "00000000:48:00.0",
        "architecture": "hopper",
        "ecc_mode": {"current": "enabled", "pending": "enabled"},
        "ecc_errors": {
            "volatile": {"double_bit": 0, "single_bit": 0},
            "aggregate": {"double_bit": 0, "single_bit": 0},
        },
        "retired_pages": {
            "double_bit": "not supported",
            "single_bit": "not supported",
            "pending": "not supported",
        },
        "remapped_rows": {"corrected": 0, "uncorrected": 0, "pending": False, "failure": False},
        "temperature_c": 34,
        "temperature_thresholds_c": {"slowdown": 90, "shutdown": 95},
        "power_w": {"usage": 71.0, "limit": 700.0},
        "utilization_percent": {"gpu": 0, "memory": 0},
        "clocks_event_reasons": ["gpu_idle"],
        "xid_events": [],
        "xid_watch": "registered",
        "checks": {
            "device_handle": "pass",
            "ecc_dbe": "pass",
            "retired_pages": "not applicable: row remapping in use",
            "row_remap": "pass",
            "temperature": "pass",
            "xid": "pass",
        },
    }


def test_unavailable_nvml_reads_nothing_else() -> None:
    verdict, nvml = run(FakeNode.hgx(8).without_nvml(NVML_ERROR_LIBRARY_NOT_FOUND))
    assert nvml.calls == ["nvmlInit"]
    assert verdict.document["problems"] == [
        {
            "device": None,
            "check": "nvml",
            "detail": "NVML unavailable: NVML Shared Library Not Found (NVMLError_LibraryNotFound)",
        }
    ]
    assert verdict.document["devices"] == []
    assert verdict.document["driver_version"] is None
    assert verdict.document["reason"] == "no-driver"


def test_driver_not_loaded_is_named() -> None:
    verdict, _ = run(FakeNode.hgx(8).without_nvml(NVML_ERROR_DRIVER_NOT_LOADED))
    [problem] = verdict.document["problems"]
    assert problem["detail"] == "NVML unavailable: Driver Not Loaded (NVMLError_DriverNotLoaded)"
    # A driver still loading is waited for, not a missing driver.
    assert verdict.document["reason"] is None


def test_failed_handle_is_reported_and_the_other_gpus_are_still_checked() -> None:
    node = FakeNode.hgx(8).gpu(
        2, lambda g: g.raising("nvmlDeviceGetHandleByIndex", NVML_ERROR_GPU_IS_LOST)
    )
    verdict, nvml = run(node.gpu(5, lambda g: g.with_volatile_dbe(1)))
    devices = verdict.document["devices"]
    assert devices[2] == {
        "index": 2,
        "handle": "error: GPU is lost (NVMLError_GpuIsLost)",
        "checks": {"device_handle": "fail"},
    }
    assert [d["checks"]["ecc_dbe"] for i, d in enumerate(devices) if i != 2] == [
        "pass",
        "pass",
        "pass",
        "pass",
        "fail",
        "pass",
        "pass",
    ]
    assert nvml.calls.count("nvmlDeviceRegisterEvents") == 7


def test_problem_details_say_what_was_found() -> None:
    node = FakeNode.hgx(7).with_driver("550.144.03").gpu(5, lambda g: g.with_volatile_dbe(2))
    node.gpu(6, lambda g: g.change(temperature_c=91).with_xids(79))
    verdict, _ = run(node)
    assert [p["detail"] for p in verdict.document["problems"]] == [
        "driver 550.144.03 is loaded, expected 570.124.06",
        "found 7 GPUs, expected 8",
        "2 volatile double-bit ECC error(s) since the driver loaded",
        "91 C is over the 85 C limit (GPU thresholds: slowdown 90 C, shutdown 95 C)",
        "critical Xid 79 (GPU has fallen off the bus) reported",
    ]


def test_not_supported_is_recorded_never_passed() -> None:
    verdict, _ = run(
        FakeNode.hgx(8, FakeGpu.rtx4090).gpu(0, lambda g: g.change(temperature_c=None))
    )
    device = verdict.document["devices"][0]
    assert device["checks"] == {
        "device_handle": "pass",
        "ecc_dbe": "not supported",
        "retired_pages": "not supported",
        "row_remap": "not supported",
        "temperature": "not supported",
        "xid": "pass",
    }
    assert device["ecc_mode"] == "not supported"
    assert device["ecc_errors"]["volatile"]["double_bit"] == "not supported"
    assert device["remapped_rows"] == "not supported"
    assert device["temperature_c"] == "not supported"


def test_pre_ampere_uses_retired_pages_instead_of_row_remapping() -> None:
    node = FakeNode.hgx(8, FakeGpu.v100).gpu(
        0, lambda g: g.change(retired_pages={"double_bit": [1, 2], "single_bit": [3]})
    )
    verdict, _ = run(node)
    device = verdict.document["devices"][0]
    assert device["architecture"] == "volta"
    assert device["retired_pages"] == {"double_bit": 2, "single_bit": 1, "pending": False}
    assert device["remapped_rows"] == "not supported"
    assert device["checks"]["retired_pages"] == "pass"
    assert device["checks"]["row_remap"] == "not applicable: page retirement in use"


def test_ecc_disabled_is_skipped_not_passed() -> None:
    verdict, _ = run(FakeNode.hgx(8).gpu(2, lambda g: g.change(ecc_mode=[0, 1])))
    device = verdict.document["devices"][2]
    assert device["ecc_mode"] == {"current": "disabled", "pending": "enabled"}
    assert device["checks"]["ecc_dbe"] == "skipped: ECC disabled"


def test_xid_watch_not_supported_is_recorded() -> None:
    verdict, _ = run(FakeNode.hgx(8).gpu(3, lambda g: g.change(xid_events_supported=False)))
    device = verdict.document["devices"][3]
    assert (device["xid_watch"], device["checks"]["xid"]) == ("not supported", "not supported")


def test_application_xids_are_recorded_but_do_not_fail() -> None:
    verdict, _ = run(FakeNode.hgx(8).gpu(4, lambda g: g.with_xids(13, 31)))
    assert verdict.document["devices"][4]["xid_events"] == [13, 31]
    assert verdict.document["devices"][4]["checks"]["xid"] == "pass"


def test_xid_wait_is_bounded_by_the_setting() -> None:
    _, nvml = run(FakeNode.hgx(8), replace(EXPECT, xid_wait_seconds=2))
    assert nvml.wait_timeouts_ms and all(0 <= t <= 2000 for t in nvml.wait_timeouts_ms)
    _, nvml = run(FakeNode.hgx(8), replace(EXPECT, xid_wait_seconds=0))
    assert nvml.wait_timeouts_ms == [0]


def test_an_xid_storm_is_cut_off() -> None:
    verdict, nvml = run(FakeNode.hgx(8).gpu(0, lambda g: g.with_xids(*[13] * 1000)))
    assert len(verdict.document["devices"][0]["xid_events"]) == MAX_XID_EVENTS
    assert len(nvml.wait_timeouts_ms) == MAX_XID_EVENTS


def test_clocks_event_reasons_fall_back_to_the_older_function() -> None:
    node = FakeNode.hgx(8).gpu(
        0,
        lambda g: g.change(clocks_event_reasons=0x44).raising(
            "nvmlDeviceGetCurrentClocksEventReasons", NVML_ERROR_FUNCTION_NOT_FOUND
        ),
    )
    verdict, nvml = run(node)
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" in nvml.calls
    assert verdict.document["devices"][0]["clocks_event_reasons"] == [
        "sw_power_cap",
        "hw_thermal_slowdown",
    ]


def test_cli_reports_a_broken_check_as_could_not_check(capsys: pytest.CaptureFixture[str]) -> None:
    nvml = FakeNvml(FakeNode.hgx(8))

    def broken(handle: object) -> str:
        raise RuntimeError("binding exploded")

    nvml.nvmlDeviceGetName = broken  # type: ignore[method-assign]
    code = main(["check", "--expect-driver", "570.124.06", "--expect-gpus", "8"], nvml=nvml)
    out = json.loads(capsys.readouterr().out)
    assert code == 2
    assert out["status"] == "unavailable"
    assert out["problems"] == [
        {
            "device": None,
            "check": "internal",
            "detail": "the health check failed: RuntimeError: binding exploded",
        }
    ]
    assert nvml.initialized == 0, "NVML is shut down even when the check breaks"
