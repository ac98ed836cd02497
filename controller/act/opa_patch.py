"""What changed in a document the controller keeps in OPA, as JSON Patch operations.

The documents the gate reads (spend per team, workload records and reservations per namespace
or team and workload) grow with the fleet, while a pass changes a few of their entries. So a
pass reads what a replica holds (`GET`), and writes the difference (`PATCH /v1/data/<path>`
with JSON Patch operations, RFC 6902; OPA's Data API): an entry added or changed is one `add`
of that entry (for an object member, `add` also replaces), one gone is one `remove`. A pass at
100,000 pods then writes in proportion to what changed since the last one, and a replica that
missed a pass or restarted is brought to the whole document by the same difference.
"""

from __future__ import annotations

from typing import Any, Final

Op = dict[str, Any]

PATCH_MAX_OPERATIONS: Final = 1_000
"""Above this many operations the whole document is written (PUT) instead: OPA applies a JSON
Patch in one transaction whose cost per operation grows with the operations before it.
Measured (the pinned OPA with the gate's policies and anchors, 100,000 reservations held, a
loaded 2-core machine): a PATCH of 100 operations 0.05 CPU-s of OPA, 1,000 0.33, 3,000 1.05,
10,000 7.2 (35 s wall), 50,000 still running after 600 s; a PUT of all 100,000 entries 0.78
(4 s wall). A pass after a mass change (the reservations' hourly step moves every entry, a
fleet that grew) had sent tens of thousands of operations, timed out, and left OPA busy with
them through the next pass (issue 31's 10,000-node bench)."""


def pointer(parts: tuple[str, ...]) -> str:
    """The JSON Pointer (RFC 6901) of the member at `parts`: `~` and `/` escaped (record keys
    hold `/`, as in "deployments.apps/web")."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def write_whole(ops: list[Op]) -> bool:
    """Whether to write the whole document rather than `ops`: the document is not held (one
    operation at the root), or the difference is above `PATCH_MAX_OPERATIONS`."""
    return bool(ops) and (ops[0]["path"] == "" or len(ops) > PATCH_MAX_OPERATIONS)


def document_ops(old: Any, new: Any, depth: int, at: tuple[str, ...] = ()) -> list[Op]:
    """The operations that turn `old` into `new`, object members compared down to `depth`
    levels (below that a changed member is written whole: an entry, not its fields). `old` not
    an object where `new` is one (or depth 0): one operation for the whole value at `at`."""
    if old == new:
        return []
    if depth <= 0 or not isinstance(old, dict) or not isinstance(new, dict):
        return [{"op": "add", "path": pointer(at), "value": new}]
    ops: list[Op] = [{"op": "remove", "path": pointer((*at, k))} for k in old if k not in new]
    for key, value in new.items():
        if key not in old:
            ops.append({"op": "add", "path": pointer((*at, key)), "value": value})
        else:
            ops.extend(document_ops(old[key], value, depth - 1, (*at, key)))
    return ops
