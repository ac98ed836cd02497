"""The chain of owners the controller keys reservations and approvals by follows only owner
references that name the object observed under their uid (issue 33, forged owners)."""

from __future__ import annotations

from controller.decide.lineage import by_uid, lineage
from controller.observe.model import OwnerRef
from controller.observe.operator_objects import operator_object_from_api
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


def operator_obj(kind: str, name: str, uid: str, owner: dict[str, str] | None = None):
    metadata: dict[str, object] = {"name": name, "namespace": "ml-research", "uid": uid}
    if owner:
        metadata["ownerReferences"] = [{"controller": True, **owner}]
    return operator_object_from_api(kind, {"metadata": metadata, "spec": {}})


TRAINER = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob"}
RAYJOB = {"apiVersion": "ray.io/v1", "kind": "RayJob"}


def test_a_trainjobs_pods_are_the_trainjobs_through_its_jobset() -> None:
    """Pod -> Job -> JobSet -> TrainJob: the JobSet is observed (its owner read), so the top is
    the TrainJob the user wrote, not the JobSet the Trainer made."""
    jobset = operator_obj("JobSet", "tj", "u-js", {**TRAINER, "name": "tj", "uid": "u-tj"})
    job = obj("Job", "tj-node-0", "u-job", {"kind": "JobSet", "name": "tj", "uid": "u-js"})
    objects = by_uid([jobset, job])
    owner = OwnerRef("batch/v1", "Job", "tj-node-0", "u-job")
    chain = lineage("p", "Pod", "tj-node-0-0", 0.0, owner, objects)
    assert (chain.top_uid, chain.kind, chain.name) == ("u-tj", "TrainJob", "tj")
    assert chain.between == ("p", "u-job", "u-js")
    # without the JobSet observed (its operator not installed) the chain stops at it, as before
    chain = lineage("p", "Pod", "tj-node-0-0", 0.0, owner, by_uid([job]))
    assert (chain.top_uid, chain.kind) == ("u-js", "JobSet")


def test_a_rayjobs_pods_are_the_rayjobs_through_its_raycluster() -> None:
    cluster = operator_obj("RayCluster", "rj-x", "u-rc", {**RAYJOB, "name": "rj", "uid": "u-rj"})
    owner = OwnerRef("ray.io/v1", "RayCluster", "rj-x", "u-rc")
    chain = lineage("p", "Pod", "rj-x-head", 0.0, owner, by_uid([cluster]))
    assert (chain.top_uid, chain.kind, chain.between) == ("u-rj", "RayJob", ("p", "u-rc"))


def test_a_reference_naming_a_jobsets_uid_as_another_kind_is_not_followed() -> None:
    """A forged reference: a pod names a RayCluster with the uid of a JobSet."""
    jobset = operator_obj("JobSet", "tj", "u-js", {**TRAINER, "name": "tj", "uid": "u-tj"})
    forged = OwnerRef("ray.io/v1", "RayCluster", "mine", "u-js")
    chain = lineage("p", "Pod", "p", 0.0, forged, by_uid([jobset]))
    assert (chain.top_uid, chain.kind) == ("p", "Pod")


def test_the_controllers_role_may_list_every_operator_object_it_climbs() -> None:
    """components/controller_job.py grants list on exactly the kinds a pass lists to climb
    (the components do not import the controller: the two lists are held together here)."""
    from components.controller_job import OPERATOR_LINKS
    from controller.observe.operator_objects import OPERATOR_LINK_APIS

    granted = {(group, plural) for group, plurals in OPERATOR_LINKS.items() for plural in plurals}
    assert granted == {(group, plural) for group, plural, _ in OPERATOR_LINK_APIS.values()}
