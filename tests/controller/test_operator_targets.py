"""The operators' workloads as reclaim and stop targets: which object a pod's workload is
(decide.workloads.operator_target), and what act.owners writes on the top of its chain against
a scripted API of the objects the real operators make (owner references as they set them)."""

from __future__ import annotations

import copy
import io
from typing import Any

import pytest

from controller import annotations as own
from controller.act.events import EventRecorder
from controller.act.idle import stop_workload
from controller.act.owners import stop_operator_workload
from controller.act.runtime import Runtime
from controller.config import Settings
from controller.decide.idle import PodJudgement, ReclaimPlan, Verdict, plan_idle
from controller.decide.workloads import reclaim_target
from controller.errors import ConflictError, NotFoundError
from controller.observe.kube import object_path
from controller.summary import Summary
from tests.controller.builders import NOW, a_pod, fleet

NS = "ml-research"


# --- targets --------------------------------------------------------------------------------


def test_a_jobsets_pod_is_the_jobsets_through_its_job() -> None:
    pod = (
        a_pod("tj-node-0-0")
        .gpus(2)
        .owned_by("Job", "tj-node-0", api_version="batch/v1")
        .label("jobset.sigs.k8s.io/jobset-name", "tj")
        .build()
    )
    target = reclaim_target(pod)
    assert (target.kind, target.name, target.method, target.via) == (
        "JobSet",
        "tj",
        "suspend",
        "tj-node-0",
    )
    assert target.api_version == "jobset.x-k8s.io/v1alpha2"


def test_a_plain_jobs_pod_stays_the_jobs() -> None:
    pod = a_pod("j-0").gpus(1).owned_by("Job", "j", api_version="batch/v1").build()
    target = reclaim_target(pod)
    assert (target.kind, target.name, target.method) == ("Job", "j", "suspend")


def test_a_leaderworkersets_pod_is_the_lws_through_its_statefulset() -> None:
    pod = (
        a_pod("lws-0-1")
        .gpus(1)
        .owned_by("StatefulSet", "lws-0")
        .label("leaderworkerset.sigs.k8s.io/name", "lws")
        .build()
    )
    target = reclaim_target(pod)
    assert (target.kind, target.name, target.method, target.via) == (
        "LeaderWorkerSet",
        "lws",
        "scale-to-zero",
        "lws-0",
    )
    plain = a_pod("db-0").gpus(1).owned_by("StatefulSet", "db").build()
    assert reclaim_target(plain).kind == "StatefulSet"


def test_a_rayclusters_pod_is_the_rayclusters() -> None:
    pod = a_pod("rc-worker-x").gpus(1).owned_by("RayCluster", "rc", api_version="ray.io/v1").build()
    target = reclaim_target(pod)
    assert (target.kind, target.name, target.method, target.via) == (
        "RayCluster",
        "rc",
        "suspend",
        None,
    )


def test_an_unknown_owner_stays_unsupported() -> None:
    pod = a_pod("d-x").gpus(1).owned_by("DaemonSet", "d").build()
    assert reclaim_target(pod).method == "unsupported"


# --- the API of the operators' objects --------------------------------------------------------


def obj(
    api_version: str, kind: str, name: str, owner: tuple[str, str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "uid": "o-" + name,
        "resourceVersion": "5",
    }
    if owner is not None:
        api, kind_, owner_name = owner
        metadata["ownerReferences"] = [
            {
                "apiVersion": api,
                "kind": kind_,
                "name": owner_name,
                "uid": "o-" + owner_name,
                "controller": True,
            }
        ]
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec}


PLURALS = {
    "Job": "jobs",
    "JobSet": "jobsets",
    "TrainJob": "trainjobs",
    "RayCluster": "rayclusters",
    "RayJob": "rayjobs",
    "StatefulSet": "statefulsets",
    "LeaderWorkerSet": "leaderworkersets",
    "Pod": "pods",
}


class ObjectsKube:
    """GET answers the objects by path; merge_patch records the patch (after `conflicts` 409s)."""

    def __init__(self, *objects: dict[str, Any], conflicts: int = 0) -> None:
        self.objects = {
            object_path(
                o["apiVersion"], PLURALS[o["kind"]], NS, o["metadata"]["name"]
            ): copy.deepcopy(o)
            for o in objects
        }
        self.conflicts = conflicts
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.events: list[dict[str, Any]] = []

    def get(self, path: str) -> dict[str, Any]:
        if path not in self.objects:
            raise NotFoundError(f"GET {path}: 404")
        return copy.deepcopy(self.objects[path])

    def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        if self.conflicts:
            self.conflicts -= 1
            raise ConflictError(f"PATCH {path}: 409")
        self.patches.append((path, patch))
        return self.objects[path]

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.events.append(body)
        return body


def runtime(kube: ObjectsKube) -> Runtime:
    return Runtime(
        kube=kube,  # type: ignore[arg-type]
        opa=None,  # type: ignore[arg-type]
        fleet=fleet(),
        settings=Settings(prometheus_url="http://unused", opa_url="http://unused"),
        now=NOW,
        summary=Summary(),
        out=io.StringIO(),
        events=EventRecorder(kube, dry_run=False),  # type: ignore[arg-type]
    )


def item(*builders: Any) -> ReclaimPlan:
    judgements = tuple(
        PodJudgement(pod=b.build(), verdict=Verdict.RECLAIM, reason="GPU idle for 1h")
        for b in builders
    )
    return ReclaimPlan(target=reclaim_target(judgements[0].pod), pods=judgements)


TRAINER = "trainer.kubeflow.org/v1alpha1"
JOBSET = "jobset.x-k8s.io/v1alpha2"


def trainjob_objects(**trainjob_spec: Any) -> list[dict[str, Any]]:
    return [
        obj(TRAINER, "TrainJob", "tj", **trainjob_spec),
        obj(JOBSET, "JobSet", "tj", (TRAINER, "TrainJob", "tj")),
        obj("batch/v1", "Job", "tj-node-0", (JOBSET, "JobSet", "tj")),
        obj("batch/v1", "Job", "tj-node-1", (JOBSET, "JobSet", "tj")),
    ]


def jobset_pod(job: str, index: int, jobset: str = "tj") -> Any:
    return (
        a_pod(f"{job}-{index}")
        .gpus(2)
        .on("n1")
        .owned_by("Job", job, api_version="batch/v1")
        .label("jobset.sigs.k8s.io/jobset-name", jobset)
    )


def test_a_trainjobs_pods_suspend_the_trainjob_not_its_jobset() -> None:
    """The Trainer applies the TrainJob's suspend onto its JobSet again: the TrainJob is the
    object stopped, once for the pods of both its Jobs."""
    kube = ObjectsKube(*trainjob_objects(suspend=False), conflicts=1)
    plan = item(jobset_pod("tj-node-0", 0), jobset_pod("tj-node-1", 0))
    ref = stop_workload(runtime(kube), plan, "idle GPUs reclaimed")
    assert ref is not None
    assert (ref.kind, ref.name, ref.uid) == ("TrainJob", "tj", "o-tj")
    [(path, patch)] = kube.patches
    assert path == object_path(TRAINER, "trainjobs", NS, "tj")
    assert patch["spec"] == {"suspend": True}
    assert patch["metadata"]["annotations"][own.RECLAIM_REASON] == "idle GPUs reclaimed"
    assert patch["metadata"]["resourceVersion"] == "5"


def test_a_jobset_of_its_own_is_suspended() -> None:
    kube = ObjectsKube(
        obj(JOBSET, "JobSet", "js"), obj("batch/v1", "Job", "js-w-0", (JOBSET, "JobSet", "js"))
    )
    ref = stop_workload(runtime(kube), item(jobset_pod("js-w-0", 0, "js")), "why")
    assert ref is not None and (ref.kind, ref.name) == ("JobSet", "js")
    [(path, patch)] = kube.patches
    assert path == object_path(JOBSET, "jobsets", NS, "js")
    assert patch["spec"] == {"suspend": True}


def test_a_suspended_trainjob_is_not_written_again() -> None:
    kube = ObjectsKube(*trainjob_objects(suspend=True))
    assert stop_workload(runtime(kube), item(jobset_pod("tj-node-0", 0)), "why") is None
    assert kube.patches == []


def test_a_job_with_a_forged_jobset_label_is_not_stopped() -> None:
    """The label groups pods; the owners decide: a plain Job's pod labelled as a JobSet's leads
    to no JobSet, and nothing is written."""
    kube = ObjectsKube(obj("batch/v1", "Job", "mine"), obj(JOBSET, "JobSet", "theirs"))
    rt = runtime(kube)
    found = stop_operator_workload(
        rt,
        reclaim_target(jobset_pod("mine", 0, "theirs").build()),
        item(jobset_pod("mine", 0, "theirs")),
        "why",
    )
    assert isinstance(found, str) and "no operator's object" in found
    assert kube.patches == []


def test_a_jobset_created_again_under_the_same_name_is_not_stopped() -> None:
    objects = trainjob_objects()
    objects[1]["metadata"]["uid"] = "new"  # the JobSet the Job names is gone; another took its name
    kube = ObjectsKube(*objects)
    plan = item(jobset_pod("tj-node-0", 0))
    found = stop_operator_workload(runtime(kube), plan.target, plan, "why")
    assert isinstance(found, str) and "created again" in found
    assert kube.patches == []
    assert stop_workload(runtime(kube), plan, "why") is None


def test_a_gone_workload_is_nothing_to_do() -> None:
    kube = ObjectsKube()
    plan = item(jobset_pod("tj-node-0", 0))
    assert stop_operator_workload(runtime(kube), plan.target, plan, "why") is None


RAY = "ray.io/v1"


def ray_pod(name: str, cluster: str) -> Any:
    return a_pod(name).gpus(1).on("n1").owned_by("RayCluster", cluster, api_version=RAY)


def test_a_rayjobs_cluster_pods_suspend_the_rayjob() -> None:
    kube = ObjectsKube(
        obj(RAY, "RayJob", "rj", shutdownAfterJobFinishes=True),
        obj(RAY, "RayCluster", "rj-abcde", (RAY, "RayJob", "rj")),
    )
    ref = stop_workload(
        runtime(kube), item(ray_pod("h", "rj-abcde"), ray_pod("w", "rj-abcde")), "w"
    )
    assert ref is not None and (ref.kind, ref.name) == ("RayJob", "rj")
    [(path, patch)] = kube.patches
    assert path == object_path(RAY, "rayjobs", NS, "rj")
    assert patch["spec"] == {"suspend": True}


@pytest.mark.parametrize(
    "spec", [{}, {"shutdownAfterJobFinishes": True, "clusterSelector": {"ray.io/cluster": "c"}}]
)
def test_a_rayjob_kuberay_would_fail_if_suspended_is_not_stopped(spec: dict[str, Any]) -> None:
    kube = ObjectsKube(
        obj(RAY, "RayJob", "rj", **spec), obj(RAY, "RayCluster", "rj-x", (RAY, "RayJob", "rj"))
    )
    plan = item(ray_pod("w", "rj-x"))
    found = stop_operator_workload(runtime(kube), plan.target, plan, "why")
    assert isinstance(found, str) and "shutdownAfterJobFinishes" in found
    assert kube.patches == []


def test_a_raycluster_of_its_own_is_suspended() -> None:
    kube = ObjectsKube(obj(RAY, "RayCluster", "rc"))
    ref = stop_workload(runtime(kube), item(ray_pod("w", "rc")), "why")
    assert ref is not None and (ref.kind, ref.name) == ("RayCluster", "rc")
    [(_, patch)] = kube.patches
    assert patch["spec"] == {"suspend": True}


def test_a_raycluster_under_an_unknown_controller_is_not_stopped() -> None:
    """A controller the climb does not know would undo the stop (set suspend back)."""
    kube = ObjectsKube(obj(RAY, "RayCluster", "rc", ("example.com/v1", "Custom", "c")))
    plan = item(ray_pod("w", "rc"))
    found = stop_operator_workload(runtime(kube), plan.target, plan, "why")
    assert isinstance(found, str) and "would undo" in found
    assert kube.patches == []


LWS_API = "leaderworkerset.x-k8s.io/v1"


def lws_objects(replicas: int) -> list[dict[str, Any]]:
    """LWS v0.7: the leaders' StatefulSet is the LWS's; each group's workers' StatefulSet is its
    leader pod's."""
    return [
        obj(LWS_API, "LeaderWorkerSet", "lws", replicas=replicas),
        obj("apps/v1", "StatefulSet", "lws", (LWS_API, "LeaderWorkerSet", "lws")),
        obj("v1", "Pod", "lws-0", ("apps/v1", "StatefulSet", "lws")),
        obj("apps/v1", "StatefulSet", "lws-0", ("v1", "Pod", "lws-0")),
    ]


def lws_pod(name: str, owner: str, group: str = "0") -> Any:
    return (
        a_pod(name)
        .gpus(1)
        .on("n1")
        .owned_by("StatefulSet", owner)
        .label("leaderworkerset.sigs.k8s.io/name", "lws")
        .label("leaderworkerset.sigs.k8s.io/group-index", group)
    )


def test_a_leaderworkerset_is_scaled_to_zero_from_its_leader_and_workers() -> None:
    kube = ObjectsKube(*lws_objects(1))
    plan = item(lws_pod("lws-0", "lws"), lws_pod("lws-0-1", "lws-0"), lws_pod("lws-0-2", "lws-0"))
    ref = stop_workload(runtime(kube), plan, "why")
    assert ref is not None and (ref.kind, ref.name) == ("LeaderWorkerSet", "lws")
    [(path, patch)] = kube.patches
    assert path == object_path(LWS_API, "leaderworkersets", NS, "lws")
    assert patch["spec"] == {"replicas": 0}
    assert patch["metadata"]["annotations"][own.RECLAIMED_REPLICAS] == "1"


def test_a_leaderworkerset_with_groups_nobody_judged_is_not_scaled() -> None:
    kube = ObjectsKube(*lws_objects(2))
    plan = item(lws_pod("lws-0", "lws"), lws_pod("lws-0-1", "lws-0"))
    found = stop_operator_workload(runtime(kube), plan.target, plan, "why")
    assert isinstance(found, str) and "wants 2 groups" in found
    assert kube.patches == []


def test_the_controllers_role_may_stop_every_operator_kind_it_knows() -> None:
    """components/controller_job.py grants get and patch on exactly the kinds act.owners stops
    (the components do not import the controller: the two lists are held together here)."""
    from components.controller_job import OPERATOR_WORKLOADS
    from controller.decide.operator_kinds import OPERATOR_KINDS

    granted = {
        (group, plural) for group, plurals in OPERATOR_WORKLOADS.items() for plural in plurals
    }
    assert granted == {(k.group, k.plural) for k in OPERATOR_KINDS.values()}


# --- a workload of several Jobs is judged whole -------------------------------------------------


def test_a_jobsets_pods_of_several_jobs_are_reclaimed_only_together() -> None:
    """A JobSet (or a TrainJob's JobSet) is one target across its Jobs: one busy pod of one Job
    holds the whole; all idle, one reclaim of the whole."""
    from tests.controller.test_decide_idle import RULES, idle_evidence

    def node_pod(job: str) -> Any:
        return (
            a_pod(f"{job}-0")
            .gpus(1)
            .owned_by("Job", job, api_version="batch/v1")
            .label("jobset.sigs.k8s.io/jobset-name", "tj")
            .in_ns(NS)
            .type("notebook")
            .on("h100-0")
            .warned(NOW - 1000, NOW - 100)
            .build()
        )

    pods = [node_pod("tj-node-0"), node_pod("tj-node-1")]
    some = plan_idle(pods, fleet(), idle_evidence("tj-node-0-0"), NOW, RULES)
    assert some.reclaim == []
    [(target, reason)] = some.held
    assert target.key == f"JobSet/{NS}/tj" and "tj-node-1-0" in reason
    every = plan_idle(pods, fleet(), idle_evidence("tj-node-0-0", "tj-node-1-0"), NOW, RULES)
    [whole] = every.reclaim
    assert whole.target.key == f"JobSet/{NS}/tj"
    assert sorted(j.pod.name for j in whole.pods) == ["tj-node-0-0", "tj-node-1-0"]
