"""The planner's window and limit mirror the upgrade policy: the same answers from the real
OPA over a grid of times and pool sizes."""

from __future__ import annotations

from typing import Any

import pytest

from controller.upgrade.limits import in_any_window, parse_window, resolve_max_unavailable
from localfleet.servers import OpaServer

pytestmark = pytest.mark.integration

WEDNESDAY = 1794960000  # 2026-11-18 00:00 UTC
WINDOWS = [
    {"days": ["sat", "sun"], "start": "00:00", "end": "23:59"},
    {"days": ["wed"], "start": "22:00", "end": "04:00"},
    {"days": ["mon"], "start": "09:30", "end": "10:15", "timezone": "America/New_York"},
]
LIMITS: list[Any] = [1, 3, "10%", "25%", "1%", "100%"]


def test_window_and_limit_agree_with_the_policy(opa_server: OpaServer) -> None:
    pools = {
        f"p{i}": {"max_unavailable": v, "driver_version": "1.2.3"} for i, v in enumerate(LIMITS)
    }
    opa_server.put_data(
        "fleetplane/config", {"pools": pools, "upgrade": {"maintenance_windows": WINDOWS}}
    )
    problems: list[str] = []
    windows = [parse_window(w, "w", problems) for w in WINDOWS]
    assert not problems
    for step in range(0, 7 * 24 * 4 + 8):  # every 15 minutes of a week, and then some
        now = WEDNESDAY + step * 900 + (59 if step % 3 == 0 else 0)
        answer = opa_server.query(
            "fleetplane/decisions/upgrade/decision",
            {
                "node": {"metadata": {"name": "n", "labels": {"fleetplane.dev/pool": "p0"}}},
                "pool": "p0",
                "pool_nodes": 10,
                "pool_unavailable": 0,
                "now": now,
            },
        )
        assert answer["allow"] == in_any_window([w for w in windows if w], now), (now, answer)
    saturday = WEDNESDAY + 3 * 86400 + 3600
    for name, pool in pools.items():
        for nodes in (1, 4, 9, 10, 11, 40, 1000):
            limit = resolve_max_unavailable(pool["max_unavailable"], nodes)
            assert limit is not None
            for unavailable in {0, limit - 1, limit, min(limit + 1, nodes)}:
                if unavailable > nodes or unavailable < 0:
                    continue
                answer = opa_server.query(
                    "fleetplane/decisions/upgrade/decision",
                    {
                        "node": {
                            "metadata": {"name": "n", "labels": {"fleetplane.dev/pool": name}}
                        },
                        "pool": name,
                        "pool_nodes": nodes,
                        "pool_unavailable": unavailable,
                        "now": saturday,
                    },
                )
                assert answer["allow"] == (unavailable < limit), (name, nodes, unavailable, answer)
