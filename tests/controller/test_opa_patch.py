"""The difference the controller writes to OPA (controller/act/opa_patch.py), and the parts a
fleet-sized document is kept in (fleet/opa_shards.py), without servers."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.act.opa_patch import PATCH_MAX_OPERATIONS, document_ops, pointer, write_whole
from fleet.opa_anchors import package_anchors
from fleet.opa_shards import SHARDS, split

OLD = {
    "team-a": {
        "expiring": {"1795003600": 10.0},
        "workloads": {"u1": {"usd": 10.0, "expires_at": 1795003600, "uids": []}},
        "owners": {},
    },
    "team-b": {"expiring": {}, "workloads": {}, "owners": {}},
}


def test_nothing_changed_writes_nothing() -> None:
    assert document_ops(OLD, copy.deepcopy(OLD), 3) == []


def test_one_changed_entry_is_one_operation_of_that_entry() -> None:
    new = copy.deepcopy(OLD)
    new["team-a"]["workloads"]["u1"] = {"usd": 12.0, "expires_at": 1795003600, "uids": []}
    ops = document_ops(OLD, new, 3)
    assert ops == [
        {"op": "add", "path": "/team-a/workloads/u1", "value": new["team-a"]["workloads"]["u1"]}
    ]


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_the_operations_turn_the_old_document_into_the_new(depth: int) -> None:
    new = copy.deepcopy(OLD)
    del new["team-b"]  # a team gone
    new["team-c"] = {"expiring": {"1795007200": 1.0}, "workloads": {}, "owners": {}}
    new["team-a"]["workloads"]["u2"] = {"usd": 1.0, "expires_at": 1795007200, "uids": []}
    new["team-a"]["owners"]["rs/with~slash"] = "u2"  # keys are escaped (RFC 6901)
    ops = document_ops(OLD, new, depth)
    assert apply(OLD, ops) == new


def apply(document: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 `add` and `remove` of object members, as OPA applies them."""
    out = copy.deepcopy(document)
    for op in ops:
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]
        ]
        node = out
        for key in parents:
            node = node[key]
        if op["op"] == "remove":
            del node[last]
        else:
            node[last] = copy.deepcopy(op["value"])
    return out


def test_no_document_held_is_one_whole_write() -> None:
    assert document_ops(None, OLD, 3) == [{"op": "add", "path": "", "value": OLD}]


def test_a_mass_change_is_one_whole_write() -> None:
    """OPA's cost per patch operation grows with the patch: past the limit the document goes
    whole, as a replica holding none does."""
    old = {"team": {"workloads": {f"u{i}": {"usd": 1.0} for i in range(PATCH_MAX_OPERATIONS + 1)}}}
    few = copy.deepcopy(old)
    for i in range(PATCH_MAX_OPERATIONS):
        few["team"]["workloads"][f"u{i}"] = {"usd": 2.0}
    assert not write_whole(document_ops(old, few, 3))
    many = copy.deepcopy(few)
    many["team"]["workloads"][f"u{PATCH_MAX_OPERATIONS}"] = {"usd": 2.0}
    assert write_whole(document_ops(old, many, 3))
    assert write_whole(document_ops(None, many, 3))
    assert not write_whole([])


def test_pointer_escapes() -> None:
    assert pointer(("ns", "deployments.apps/web", "a~b")) == "/ns/deployments.apps~1web/a~0b"


def merged(parts: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def merge(into: dict[str, Any], part: dict[str, Any]) -> None:
        for key, value in part.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict):
                merge(into[key], value)
            else:
                assert key not in into, f"{key} in two parts"  # OPA refuses such a conflict
                into[key] = copy.deepcopy(value)

    for part in parts:
        merge(out, part)
    return out


def test_the_parts_merge_back_into_the_document() -> None:
    document = {
        "team-a": {
            "expiring": {"1": 1.0},
            "workloads": {f"u{i}": {"usd": 1.0, "expires_at": 1} for i in range(500)},
            "owners": {},
        },
        "team-b": {},
    }
    parts = split(document, 3)
    assert len(parts) == SHARDS and all(parts)  # 500 entries reach every part
    assert merged(parts) == document
    records = {"ns": {f"deployments.apps/w-{i}": {"uid": str(i)} for i in range(100)}}
    assert merged(split(records, 2)) == records


def test_anchors_are_the_packages_first_level() -> None:
    sources = [
        "package fleetplane.decisions.reclaim\n",
        "package fleetplane.lib\n",
        "package system",
    ]
    assert package_anchors(sources) == {"decisions": {}, "lib": {}}
