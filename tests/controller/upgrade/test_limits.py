"""The throttle, `max_unavailable` resolution and maintenance windows: pure, table-driven."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from controller.nodeflow.slots import resolve_max_unavailable
from controller.nodeflow.slots import slots as upgrade_slots
from controller.upgrade.limits import (
    Window,
    in_window,
    next_opening,
    parse_window,
)


@dataclass(frozen=True)
class SlotCase:
    name: str
    max_parallel: int
    in_progress: int
    max_unavailable: int
    unavailable: int
    want: int


SLOT_CASES = [
    SlotCase("idle pool, parallel is the bound", 1, 0, 5, 0, 1),
    SlotCase("idle pool, max_unavailable is the bound", 10, 0, 3, 0, 3),
    SlotCase("some in the rollout", 10, 2, 5, 2, 3),
    SlotCase("nodes unavailable for other reasons count", 10, 0, 3, 2, 1),
    SlotCase("limit reached", 10, 3, 3, 3, 0),
    SlotCase("more unavailable than allowed never goes negative", 10, 0, 2, 5, 0),
    SlotCase("parallel slots used up", 2, 2, 10, 2, 0),
    SlotCase("parallel over-committed never goes negative", 1, 3, 10, 3, 0),
    SlotCase("cordoned nodes outside the rollout use unavailability only", 4, 1, 4, 3, 1),
]


@pytest.mark.parametrize("case", SLOT_CASES, ids=lambda c: c.name)
def test_upgrade_slots(case: SlotCase) -> None:
    got = upgrade_slots(
        max_parallel=case.max_parallel,
        in_progress=case.in_progress,
        max_unavailable=case.max_unavailable,
        unavailable=case.unavailable,
    )
    assert got == case.want


@pytest.mark.parametrize(
    ("value", "nodes", "want"),
    [
        (2, 20, 2),
        (0, 20, 1),  # at least one, so a pool can always progress
        ("3", 20, 3),
        ("10%", 20, 2),
        ("10%", 21, 3),  # rounded up
        ("10%", 1000, 100),
        ("25%", 4, 1),
        ("1%", 5, 1),
        ("0%", 50, 1),
        ("100%", 7, 7),
        ("10 %", 20, None),
        ("ten", 20, None),
        (-1, 20, None),
        (True, 20, None),
        (None, 20, None),
        (2.5, 20, None),
    ],
)
def test_resolve_max_unavailable_mirrors_the_policy(
    value: object, nodes: int, want: int | None
) -> None:
    assert resolve_max_unavailable(value, nodes) == want


# The policy test's week (UTC): Wednesday 2026-11-18 00:00 and Saturday 2026-11-21 00:00.
WEDNESDAY = 1794960000
SATURDAY = WEDNESDAY + 3 * 86400
HOUR = 3600
WEEKEND = Window(days=frozenset({"sat", "sun"}), start=0, end=23 * 60 + 59)
WEDNESDAY_NIGHT = Window(days=frozenset({"wed"}), start=22 * 60, end=4 * 60)
FIXTURE = (WEEKEND, WEDNESDAY_NIGHT)

WINDOW_CASES = {
    "saturday midnight": (SATURDAY, True),
    "sunday last minute": (SATURDAY + 86400 + 23 * HOUR + 3599, True),
    "monday midnight": (SATURDAY + 2 * 86400, False),
    "wednesday before the night window": (WEDNESDAY + 21 * HOUR + 3540, False),
    "wednesday night": (WEDNESDAY + 22 * HOUR, True),
    "thursday early morning of the night window": (WEDNESDAY + 86400 + 3 * HOUR, True),
    "thursday end minute of the night window": (WEDNESDAY + 86400 + 4 * HOUR + 59, True),
    "thursday after the night window": (WEDNESDAY + 86400 + 4 * HOUR + 60, False),
    "thursday night": (WEDNESDAY + 86400 + 23 * HOUR, False),
    "wednesday noon": (WEDNESDAY + 12 * HOUR, False),
}


@pytest.mark.parametrize("name", sorted(WINDOW_CASES))
def test_maintenance_window(name: str) -> None:
    now, want = WINDOW_CASES[name]
    assert any(in_window(w, now) for w in FIXTURE) == want


def test_window_in_another_time_zone() -> None:
    berlin = Window(
        days=frozenset({"wed"}), start=12 * 60, end=12 * 60 + 30, timezone="Europe/Berlin"
    )
    assert in_window(berlin, WEDNESDAY + 11 * HOUR + 600)  # 12:10 in Berlin in November
    assert not in_window(berlin, WEDNESDAY + 12 * HOUR + 600)


def test_next_opening() -> None:
    assert next_opening(FIXTURE, WEDNESDAY + 12 * HOUR) == WEDNESDAY + 22 * HOUR
    assert next_opening(FIXTURE, WEDNESDAY + 86400 + 5 * HOUR) == SATURDAY
    assert next_opening((), WEDNESDAY) is None


@pytest.mark.parametrize(
    ("raw", "want_problems"),
    [
        ({"days": ["sat"], "start": "00:00", "end": "23:59"}, []),
        ({"days": ["sat"]}, []),
        ({"days": []}, ["w.days"]),
        ({"days": ["saturday"]}, ["w.days"]),
        ({"days": ["sat"], "start": "24:00"}, ["w.start"]),
        ({"days": ["sat"], "end": "7:00"}, ["w.end"]),
        ({"days": ["sat"], "timezone": "Mars/Olympus"}, ["w.timezone"]),
        ("sat", ["w"]),
    ],
)
def test_parse_window_collects_problems(raw: object, want_problems: list[str]) -> None:
    problems: list[str] = []
    window = parse_window(raw, "w", problems)
    assert [p.split(":")[0] for p in problems] == want_problems
    assert (window is None) == bool(want_problems)
