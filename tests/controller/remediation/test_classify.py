"""The fault table and the node verdict, pure (table-driven)."""

from __future__ import annotations

import pytest

from controller.remediation import classify as c
from controller.remediation import states
from controller.remediation.signals import GpuSignals, NodeSignals

THERMAL = c.Thermal(hot_c=85, cool_c=75, expected_samples=5)


def gpu(index: str = "0", **kw: object) -> GpuSignals:
    values: dict[str, object] = {
        "fresh": True,
        "temp_samples": 5,
        "temp_min_c": 40.0,
        "temp_max_c": 45.0,
    }
    values.update(kw)
    return GpuSignals(hostname="n", gpu=index, **values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("signals", "kind", "remedy"),
    [
        ({"xids": {13: 0.0}}, c.APPLICATION, None),
        ({"xids": {31: 0.0}}, c.APPLICATION, None),
        ({"xids": {43: 0.0}}, c.APPLICATION, None),
        ({"xids": {45: 0.0}}, c.APPLICATION, None),
        ({"xids": {63: 0.0}}, c.APPLICATION, None),
        ({"xids": {92: 0.0}}, c.DEGRADED, None),
        ({"xids": {94: 0.0}}, c.CONTAINED_ECC, None),
        ({"xids": {48: 0.0}}, c.UNCORRECTABLE_ECC, states.GPU_RESET),
        ({"xids": {95: 0.0}}, c.UNCORRECTABLE_ECC, states.GPU_RESET),
        ({"xids": {64: 0.0}}, c.GPU_ERROR, states.GPU_RESET),
        ({"xids": {119: 0.0}}, c.GPU_ERROR, states.GPU_RESET),
        ({"xids": {120: 0.0}}, c.GPU_ERROR, states.GPU_RESET),
        ({"xids": {74: 0.0}}, c.NVLINK, states.GPU_RESET),
        ({"xids": {79: 0.0}}, c.FALLEN_OFF_BUS, states.REBOOT),
        ({"xids": {9999: 0.0}}, c.UNCLASSIFIED, None),
        ({"counters": {"ecc_dbe_volatile": 1.0}}, c.UNCORRECTABLE_ECC, states.GPU_RESET),
        ({"counters": {"remapped_rows_uncorrectable": 1.0}}, c.ROW_REMAP_PENDING, states.GPU_RESET),
        ({"flags": {"row_remap_pending": 1.0}}, c.ROW_REMAP_PENDING, states.GPU_RESET),
        ({"flags": {"row_remap_failure": 1.0}}, c.ROW_REMAP_FAILURE, states.REPLACE),
        ({"counters": {"pcie_replays": 3.0}}, c.DEGRADED, None),
        ({"counters": {"nvlink_crc_flit_errors": 3.0}}, c.DEGRADED, None),
        ({"temp_min_c": 86.0, "temp_max_c": 90.0}, c.THERMAL, c.CORDON),
    ],
)
def test_each_rule(signals: dict[str, object], kind: str, remedy: str | None) -> None:
    (fault,) = c.classify_gpu(gpu(**signals), THERMAL, since=None)
    assert (fault.kind, fault.remedy) == (kind, remedy)
    assert fault.source


def test_nothing_on_a_quiet_gpu_and_nothing_from_a_stale_one() -> None:
    assert c.classify_gpu(gpu(), THERMAL, since=None) == []
    assert c.classify_gpu(gpu(fresh=False, xids={79: 0.0}), THERMAL, since=None) == []


def test_temperature_needs_every_sample_and_a_full_window() -> None:
    assert c.classify_gpu(gpu(temp_min_c=84.0, temp_max_c=95.0), THERMAL, since=None) == []
    assert c.classify_gpu(gpu(temp_min_c=90.0, temp_samples=4), THERMAL, since=None) == []


def test_an_xid_first_seen_before_the_return_is_history() -> None:
    assert c.classify_gpu(gpu(xids={79: 100.0}), THERMAL, since=200.0) == []
    assert c.classify_gpu(gpu(xids={79: 300.0}), THERMAL, since=200.0)[0].kind == c.FALLEN_OFF_BUS


def test_node_verdict_unknown_and_worst_and_cool() -> None:
    assert not c.classify_node("n", None, expected_gpus=8, thermal=THERMAL).known
    stale = NodeSignals(hostname="n", gpus={"0": gpu(fresh=False)})
    assert not c.classify_node("n", stale, expected_gpus=8, thermal=THERMAL).known
    signals = NodeSignals(
        hostname="n",
        gpus={
            "0": gpu("0", xids={48: 0.0}),
            "1": gpu("1", flags={"row_remap_failure": 1.0}),
            "2": gpu("2", temp_min_c=90.0, temp_max_c=91.0),
        },
    )
    verdict = c.classify_node("n", signals, expected_gpus=3, thermal=THERMAL)
    assert verdict.worst is not None and verdict.worst.remedy == states.REPLACE
    assert not verdict.cool
    partial = NodeSignals(hostname="n", gpus={"0": gpu("0", temp_max_c=60.0)})
    one_of_two = c.classify_node("n", partial, expected_gpus=2, thermal=THERMAL)
    assert one_of_two.unknown_gpus == ["1"] and not one_of_two.cool  # unknown is never cool
    whole = c.classify_node("n", partial, expected_gpus=1, thermal=THERMAL)
    assert whole.cool


def test_escalation_order() -> None:
    assert states.next_remedy(states.GPU_RESET) == states.REBOOT
    assert states.next_remedy(states.REBOOT) == states.REPLACE
    assert states.next_remedy(states.REPLACE) == states.REPLACE
