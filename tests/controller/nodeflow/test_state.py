"""The detail codec both modes share: what survives a round trip, what a malformed annotation
reads as, and which values are left out of the written JSON."""

from __future__ import annotations

import pytest

from controller.nodeflow.state import read_since
from controller.remediation.states import Detail as HealthDetail
from controller.upgrade.states import Detail as UpgradeDetail


@pytest.mark.parametrize("text", [None, "", "not json", "[1, 2]", '"text"'])
def test_malformed_detail_reads_as_defaults(text: str | None) -> None:
    assert UpgradeDetail.decode(text) == UpgradeDetail()
    assert HealthDetail.decode(text) == HealthDetail()


def test_upgrade_detail_round_trip_drops_unknown_keys() -> None:
    detail = UpgradeDetail(target="550.90", cordoned=True, attempt=3, verdict={"status": "ok"})
    assert UpgradeDetail.decode(detail.encode()) == detail
    assert UpgradeDetail.decode('{"target": "1.2", "surprise": 1}') == UpgradeDetail(target="1.2")


@pytest.mark.parametrize("attempt", [-1, True, "2", 1.5])
def test_a_bad_attempt_is_dropped(attempt: object) -> None:
    import orjson

    text = orjson.dumps({"attempt": attempt, "target": "1.2"}).decode()
    assert UpgradeDetail.decode(text).attempt == 0
    assert HealthDetail.decode(text).attempt == 0


def test_cordoned_only_when_true() -> None:
    assert UpgradeDetail.decode('{"cordoned": "yes"}').cordoned is False
    assert HealthDetail.decode('{"cordoned": 1}').cordoned is False
    assert HealthDetail.decode('{"cordoned": true}').cordoned is True


def test_each_mode_leaves_out_its_own_empty_values() -> None:
    # The upgrade writes an empty verdict (it is a verdict); the health detail leaves out empty
    # collections, as it always did.
    assert UpgradeDetail(verdict={}).encode() == '{"verdict":{}}'
    assert UpgradeDetail().encode() == "{}"
    assert HealthDetail(evicted={}, history=[], fault=None).encode() == "{}"
    assert HealthDetail(remedy="reboot", attempt=2).encode() == '{"remedy":"reboot","attempt":2}'


def test_health_detail_drops_its_malformed_fields() -> None:
    text = '{"evicted": [], "history": {}, "fault": "x", "started": "now", "remedy": "reboot"}'
    assert HealthDetail.decode(text) == HealthDetail(remedy="reboot")
    assert HealthDetail.decode('{"started": true}').started is None
    assert HealthDetail.decode('{"started": 12}').started == 12


def test_but_keeps_the_mode_type() -> None:
    changed = HealthDetail(remedy="gpu-reset").but(attempt=4)
    assert isinstance(changed, HealthDetail)
    assert changed == HealthDetail(remedy="gpu-reset", attempt=4)


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [({}, None), ({"k": ""}, None), ({"k": "soon"}, None), ({"k": "1700000000"}, 1700000000.0)],
)
def test_read_since(annotations: dict[str, str], expected: float | None) -> None:
    assert read_since(annotations, "k") == expected
