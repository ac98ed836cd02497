"""Writing a state with read-back, against a stand-in for the API server's merge patch: the
write is guarded by the state the step was planned from, a conflict re-reads the node, and a
state that does not read back is a temporary error."""

from __future__ import annotations

from typing import Any, cast

import pytest

from controller.errors import ConflictError, TemporaryError
from controller.log import Log
from controller.nodeflow.act import KEEP, Written, write_node_state
from controller.observe.kube import KubeClient

LABEL = "fleetplane.dev/example-state"


class Node:
    """One node's metadata; a patch with a stale resourceVersion is a conflict."""

    def __init__(self, state: str | None, *, sticky: bool = False) -> None:
        self.labels: dict[str, str] = {LABEL: state} if state else {}
        self.version = 1
        self.sticky = sticky
        """Keep the label whatever is written (a webhook that reverts it)."""
        self.patches: list[dict[str, Any]] = []

    def get(self, path: str) -> dict[str, Any]:
        return {"metadata": {"labels": dict(self.labels), "resourceVersion": str(self.version)}}

    def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patches.append(patch)
        metadata = patch.get("metadata") or {}
        wanted = metadata.get("resourceVersion")
        if wanted is not None and wanted != str(self.version):
            raise ConflictError("stale")
        if not self.sticky:
            for key, value in (metadata.get("labels") or {}).items():
                if value is None:
                    self.labels.pop(key, None)
                else:
                    self.labels[key] = value
        self.version += 1
        return self.get(path)


def write(node: Node, *, expected: str | None, wanted: Any, version: str | None) -> Written | None:
    labels = {} if wanted is KEEP else {LABEL: wanted}
    return write_node_state(
        cast(KubeClient, node),
        "gpu-1",
        label=LABEL,
        expected=expected,
        metadata={"labels": labels} if labels else {},
        resource_version=version,
        wanted=wanted,
        log=Log(),
        concern="example",
        shown=expected or "none",
    )


def test_writes_and_reads_back() -> None:
    node = Node("a")
    assert write(node, expected="a", wanted="b", version="1") == Written(state="b")
    assert node.labels == {LABEL: "b"}
    assert node.patches[0]["metadata"]["resourceVersion"] == "1"


def test_removing_the_label_reads_back_as_none() -> None:
    node = Node("a")
    assert write(node, expected="a", wanted=None, version="1") == Written(state=None)
    assert node.labels == {}


def test_a_conflict_rereads_and_writes_while_the_state_is_unchanged() -> None:
    node = Node("a")
    node.version = 5  # changed since the snapshot, still in state a
    assert write(node, expected="a", wanted="b", version="1") == Written(state="b")
    assert [p["metadata"]["resourceVersion"] for p in node.patches] == ["1", "5"]


def test_a_node_that_left_the_state_is_not_written() -> None:
    node = Node("a")
    node.version = 5
    node.labels[LABEL] = "c"  # another pass moved it meanwhile
    assert write(node, expected="a", wanted="b", version="1") is None
    assert node.labels == {LABEL: "c"}
    assert len(node.patches) == 1  # only the refused first try


def test_a_state_that_does_not_read_back_is_a_temporary_error() -> None:
    node = Node("a", sticky=True)
    with pytest.raises(TemporaryError, match="reads 'a' after writing 'b'"):
        write(node, expected="a", wanted="b", version="1")


def test_keep_writes_without_checking_the_label() -> None:
    node = Node("a", sticky=True)
    assert write(node, expected="a", wanted=KEEP, version=None) == Written(state="a")
