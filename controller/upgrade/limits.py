"""When nodes may start an upgrade, and how many. Pure functions, no I/O.

`upgrade_slots` is the pool throttle every node workflow shares (`controller.nodeflow.slots`):
the smaller of the parallel slots left and `max_unavailable` minus the nodes already
unavailable (cordoned or NotReady for any reason, or in the rollout). `resolve_max_unavailable`
(also there) and `in_window` mirror
`policies/fleetplane/decisions/upgrade/upgrade.rego` exactly, so the controller never plans a
step the policy would refuse for these reasons (the policy still has the last word).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from controller.nodeflow.slots import resolve_max_unavailable as resolve_max_unavailable

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
"""Indexed by `datetime.weekday()`."""

_CLOCK = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])$")


@dataclass(frozen=True, kw_only=True)
class Window:
    """A weekly maintenance window. `start`/`end` are minutes of the day, both inclusive to the
    minute ("23:59" lasts until 23:59:59); an `end` before `start` runs overnight and belongs to
    the day it starts on. Times are in `timezone` (UTC unless the window names one)."""

    days: frozenset[str]
    start: int
    end: int
    timezone: str = "UTC"


def parse_window(raw: object, at: str, problems: list[str]) -> Window | None:
    """A `Window` from `upgrade.maintenance_windows[i]`; problems are appended with their path."""
    if not isinstance(raw, dict):
        problems.append(f"{at}: must be an object")
        return None
    found = len(problems)
    days = raw.get("days")
    if not isinstance(days, list) or not days or not all(d in DAYS for d in days):
        problems.append(f"{at}.days: must be a non-empty list of {', '.join(DAYS)}")
    minutes = {}
    for key, default in (("start", "00:00"), ("end", "23:59")):
        text = raw.get(key, default)
        match = _CLOCK.match(text) if isinstance(text, str) else None
        if match is None:
            problems.append(f"{at}.{key}: must be HH:MM")
        else:
            minutes[key] = int(match.group(1)) * 60 + int(match.group(2))
    timezone = raw.get("timezone", "UTC")
    try:
        ZoneInfo(str(timezone))
    except (ZoneInfoNotFoundError, ValueError):
        problems.append(f"{at}.timezone: unknown time zone {timezone!r}")
    if len(problems) > found:
        return None
    return Window(
        days=frozenset(days or ()),
        start=minutes["start"],
        end=minutes["end"],
        timezone=str(timezone),
    )


def in_window(window: Window, now: float) -> bool:
    local = dt.datetime.fromtimestamp(now, ZoneInfo(window.timezone))
    day = DAYS[local.weekday()]
    minute = local.hour * 60 + local.minute
    if window.start <= window.end:
        return day in window.days and window.start <= minute <= window.end
    yesterday = DAYS[(local.weekday() - 1) % 7]
    return (day in window.days and minute >= window.start) or (
        yesterday in window.days and minute <= window.end
    )


def in_any_window(windows: Iterable[Window], now: float) -> bool:
    return any(in_window(window, now) for window in windows)


def next_opening(windows: Iterable[Window], now: float) -> float | None:
    """The first moment after `now` at which some window is open (None without windows)."""
    found: float | None = None
    for window in windows:
        zone = ZoneInfo(window.timezone)
        today = dt.datetime.fromtimestamp(now, zone).date()
        for offset in range(8):
            day = today + dt.timedelta(days=offset)
            if DAYS[day.weekday()] not in window.days:
                continue
            start = dt.datetime.combine(
                day, dt.time(window.start // 60, window.start % 60), tzinfo=zone
            ).timestamp()
            if start > now and (found is None or start < found):
                found = start
                break
    return found
