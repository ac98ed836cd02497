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

from typing import Any

Op = dict[str, Any]


def pointer(parts: tuple[str, ...]) -> str:
    """The JSON Pointer (RFC 6901) of the member at `parts`: `~` and `/` escaped (record keys
    hold `/`, as in "deployments.apps/web")."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


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
