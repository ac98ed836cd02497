"""The lock's rules without a server: which workflow steps take and release a node, the order,
Karpenter's marks, a NodeClaim being deleted."""

from __future__ import annotations

from typing import Any

from controller.errors import NotFoundError, PermanentError
from controller.log import Log
from controller.nodeflow import lock
from tests.controller.builders import NOW


def test_workflow_steps_that_take_and_release_a_node() -> None:
    assert lock.takes(lock.UPGRADE, "upgrade-required", "cordon-required")
    assert lock.takes(lock.UPGRADE, None, "validation-required")
    assert not lock.takes(lock.UPGRADE, "upgrade-failed", "cordon-required")
    assert lock.releases(lock.UPGRADE, "uncordon-required", "upgrade-done")
    assert not lock.releases(lock.UPGRADE, "validation-required", "upgrade-failed")
    assert lock.takes(lock.REMEDIATION, None, "quarantined")
    assert lock.takes(lock.REMEDIATION, None, "hot")
    assert lock.releases(lock.REMEDIATION, "validating", None)
    assert not lock.releases(lock.REMEDIATION, "draining", "remediating")
    # A drained node that needs replacing is Karpenter's to remove: the lock goes back.
    assert lock.releases(lock.REMEDIATION, "draining", "needs-replacement")
    assert lock.releases(lock.REMEDIATION, "remediating", "needs-replacement")


def test_the_order() -> None:
    ordered = sorted(lock.RANK, key=lambda actor: -lock.RANK[actor])
    assert ordered == ["remediation", "upgrade", "preemption", "consolidation"]


def node(**metadata: Any) -> dict[str, Any]:
    return {"metadata": {"name": "n", **metadata}, "spec": {}}


def test_a_lower_ranked_actor_yields_to_a_live_want_and_a_stale_want_is_ignored() -> None:
    fresh = node(annotations={lock.WANTED: "upgrade", lock.WANTED_SINCE: str(int(NOW - 60))})
    assert "wanted first by upgrade" in str(lock.why_not(fresh, lock.PREEMPTION, NOW))
    assert lock.why_not(fresh, lock.REMEDIATION, NOW) is None
    old = str(int(NOW - lock.WANT_SECONDS - 1))
    stale = node(annotations={lock.WANTED: "upgrade", lock.WANTED_SINCE: old})
    assert lock.why_not(stale, lock.PREEMPTION, NOW) is None


def test_a_deleted_node_is_not_taken() -> None:
    going = node(deletionTimestamp="2026-11-18T11:00:00Z")
    assert lock.why_not(going, lock.UPGRADE, NOW) == "the node is being deleted"


class Claims:
    def __init__(self, claim: Any) -> None:
        self.claim = claim

    def get(self, path: str) -> dict[str, Any]:
        assert path == "/apis/karpenter.sh/v1/nodeclaims/gpu-abc"
        if self.claim is None:
            raise NotFoundError(path)
        if self.claim == "forbidden":
            raise PermanentError("HTTP 403: nodeclaims.karpenter.sh is forbidden")
        return self.claim


class Rt:
    def __init__(self, claim: Any) -> None:
        self.kube = Claims(claim)
        self.log = Log()


def test_a_node_whose_nodeclaim_is_deleted_or_gone_is_on_its_way_out() -> None:
    owned = node(
        ownerReferences=[{"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": "gpu-abc"}]
    )
    assert lock.nodeclaim_of(owned) == "gpu-abc"
    deleting = {"metadata": {"deletionTimestamp": "2026-11-18T11:00:00Z"}}
    check = lock.claim_deleting
    assert "deleting its NodeClaim gpu-abc" in str(check(Rt(deleting), owned))  # type: ignore[arg-type]
    assert "NodeClaim gpu-abc is gone" in str(check(Rt(None), owned))  # type: ignore[arg-type]
    assert check(Rt({"metadata": {}}), owned) is None  # type: ignore[arg-type]
    assert check(Rt(None), node()) is None  # type: ignore[arg-type]
    # Unreadable (the role lacks it): the node's own marks decide.
    assert check(Rt("forbidden"), owned) is None  # type: ignore[arg-type]
