"""The chain of owners the controller keys reservations and approvals by follows only owner
references that name the object observed under their uid (issue 33, forged owners)."""

from __future__ import annotations

from controller.decide.lineage import by_uid, lineage
from controller.observe.model import OwnerRef
from controller.observe.workload_objects import WorkloadObject, workload_object_from_api


def obj(kind: str, name: str, uid: str, owner: dict[str, str] | None = None) -> WorkloadObject:
    metadata: dict[str, object] = {
        "name": name,
        "namespace": "ml-research",
        "uid": uid,
        "creationTimestamp": "2026-11-20T00:00:00Z",
    }
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "controller": True, **owner}]
    template = {"metadata": {}, "spec": {"containers": [{"name": "c"}]}}
    return workload_object_from_api(kind, {"metadata": metadata, "spec": {"template": template}})


OBJECTS = by_uid(
    [
        obj("Deployment", "serve", "u-dep"),
        obj(
            "ReplicaSet", "serve-1", "u-rs", {"kind": "Deployment", "name": "serve", "uid": "u-dep"}
        ),
        obj("StatefulSet", "other-team-trainer", "u-sts"),
    ]
)


def test_a_consistent_chain_reaches_the_workload_the_gate_judged() -> None:
    owner = OwnerRef("apps/v1", "ReplicaSet", "serve-1", "u-rs")
    chain = lineage("p", "Pod", "serve-1-abc", 0.0, owner, OBJECTS)
    assert (chain.top_uid, chain.kind, chain.between) == ("u-dep", "Deployment", ("p", "u-rs"))


def test_a_reference_to_another_objects_uid_is_not_followed() -> None:
    # The pod names a ReplicaSet of its own, with the uid of another workload's StatefulSet.
    forged = OwnerRef("apps/v1", "ReplicaSet", "mine", "u-sts")
    chain = lineage("p", "Pod", "p", 0.0, forged, OBJECTS)
    assert (chain.top_uid, chain.kind, chain.between) == ("p", "Pod", ())


def test_an_owner_not_observed_is_still_the_top() -> None:
    cron = OwnerRef("batch/v1", "CronJob", "nightly", "u-cron")
    chain = lineage("j", "Job", "nightly-1", 0.0, cron, OBJECTS)
    assert (chain.top_uid, chain.kind, chain.between) == ("u-cron", "CronJob", ("j",))
