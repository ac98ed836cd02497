"""How many nodes of a pool a workflow may take out of service now. Pure functions.

`slots` is the throttle, as in the GPU Operator's upgrade library: the smaller of the parallel
slots left and `max_unavailable` minus the nodes already unavailable. `resolve_max_unavailable`
mirrors `policies/fleetplane/decisions/upgrade/upgrade.rego` exactly, so the controller never
plans a step the policy would refuse for this reason (the policy still has the last word).
"""

from __future__ import annotations

import re
from typing import Any

_PERCENT = re.compile(r"^(0|[1-9][0-9]*)%$")


def resolve_max_unavailable(value: object, pool_nodes: int) -> int | None:
    """Nodes of a pool that may be unavailable at once. An integer is taken as is; "N%" is N
    percent of the pool rounded up; either way at least 1. None when the value is neither."""
    if isinstance(value, int) and not isinstance(value, bool):
        return max(value, 1) if value >= 0 else None
    if isinstance(value, str):
        if value.isdigit():
            return max(int(value), 1)
        match = _PERCENT.match(value)
        if match:
            percent = int(match.group(1))
            return max(-(-percent * pool_nodes // 100), 1)
    return None


def slots(*, max_parallel: int, in_progress: int, max_unavailable: int, unavailable: int) -> int:
    """Nodes that may leave service now: min(parallel slots left, max_unavailable minus the
    nodes already unavailable), never below zero."""
    return max(0, min(max_parallel - in_progress, max_unavailable - unavailable))


def natural_key(name: str) -> tuple[Any, ...]:
    """Order node names as a person reads them: gpu-2 before gpu-10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))
