"""The replay's clock: a queue of timed events, and the order of events at the same instant.

The fleet, the autoscaler and the engine all put events on the one queue; only the engine's
loop takes them off.
"""

from __future__ import annotations

import heapq
from typing import Any

# Event kinds, in the order they run at the same instant.
PERIOD, NODE_READY, INTERRUPT, RELEASE, COMPLETE, CPU_COMPLETE, ARRIVE, CPU_ARRIVE, EMPTY_CHECK = (
    range(9)
)
EVENT_NAMES = (
    "period",
    "node-ready",
    "interrupt",
    "release",
    "complete",
    "cpu-complete",
    "arrive",
    "cpu-arrive",
    "empty",
)


class EventQueue:
    """Events by time, then kind, then the order they were pushed in."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = 0

    def __bool__(self) -> bool:
        return bool(self._heap)

    def push(self, at: float, kind: int, payload: Any = None) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, kind, self._seq, payload))

    def next_time(self) -> float:
        return self._heap[0][0]

    def pop(self) -> tuple[float, int, Any]:
        at, kind, _, payload = heapq.heappop(self._heap)
        return at, kind, payload
