"""The idle writes against a scripted API (answers no real cluster gives on demand: a conflict,
then a pod created again under the same name; a delete that fails)."""

from __future__ import annotations

import copy
import io
from dataclasses import replace
from typing import Any

import pytest

from controller.act.events import EventRecorder
from controller.act.idle import act_on_idle, clear_warning, reclaim, warn
from controller.act.opa import Decision
from controller.act.runtime import Runtime
from controller.config import IdleRule, Settings
from controller.decide.idle import IdleFacts, IdlePlan, PodJudgement, ReclaimPlan, Verdict
from controller.decide.workloads import Target
from controller.errors import ConflictError, NotFoundError, PermanentError
from controller.summary import Summary
from fleet import labels as keys
from tests.controller.builders import NOW, a_pod, fleet

RULE = IdleRule(util_threshold_percent=5.0, window_seconds=3600, grace_seconds=1800)


class ScriptedKube:
    """merge_patch answers 409 `conflicts` times, then echoes the patch; get returns `current`;
    every write is recorded."""

    def __init__(self, current: dict[str, Any], conflicts: int = 1) -> None:
        self.current = current
        self.conflicts = conflicts
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.events: list[dict[str, Any]] = []
        self.deletes: list[tuple[str, Any]] = []

    def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        if self.conflicts:
            self.conflicts -= 1
            raise ConflictError(f"PATCH {path}: HTTP 409: the object has been modified")
        self.patches.append((path, patch))
        return copy.deepcopy(self.current)

    def get(self, path: str) -> dict[str, Any]:
        return copy.deepcopy(self.current)

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.events.append(body)
        return body

    def delete(self, path: str, body: Any = None) -> Any:
        self.deletes.append((path, body))
        return {}


def runtime(kube: ScriptedKube) -> Runtime:
    return Runtime(
        kube=kube,  # type: ignore[arg-type]
        opa=None,  # type: ignore[arg-type]
        fleet=fleet(),
        settings=Settings(prometheus_url="http://unused", opa_url="http://unused"),
        now=NOW,
        summary=Summary(),
        events=EventRecorder(kube, dry_run=False),  # type: ignore[arg-type]
    )


def judged(builder: Any, verdict: Verdict = Verdict.WARN) -> PodJudgement:
    return PodJudgement(pod=builder.build(), verdict=verdict, reason="GPU idle for 1h", rule=RULE)


def test_a_warning_is_not_written_on_a_pod_created_again_under_the_same_name() -> None:
    judged_pod = a_pod("nb").uid("old-uid").gpus(1).on("h100-0")
    replacement = a_pod("nb").uid("new-uid").gpus(1).on("h100-0").raw()
    replacement["metadata"]["resourceVersion"] = "7"
    kube = ScriptedKube(replacement)
    assert warn(runtime(kube), judged(judged_pod)) is False
    assert kube.patches == []
    assert kube.events == []


def test_a_warning_is_written_after_a_conflict_on_the_same_pod() -> None:
    judged_pod = a_pod("nb").uid("same-uid").gpus(1).on("h100-0")
    current = a_pod("nb").uid("same-uid").gpus(1).on("h100-0").raw()
    current["metadata"]["resourceVersion"] = "7"
    kube = ScriptedKube(current)
    assert warn(runtime(kube), judged(judged_pod)) is True
    [(_, patch)] = kube.patches
    assert patch["metadata"]["resourceVersion"] == "7"
    assert patch["metadata"]["annotations"][keys.IDLE_WARNED_AT] == str(int(NOW))
    [event] = kube.events
    assert event["involvedObject"]["uid"] == "same-uid"
    assert event["reason"] == "IdleWarning"


def test_a_warning_is_not_cleared_on_a_pod_created_again_under_the_same_name() -> None:
    judged_pod = a_pod("nb").uid("old-uid").gpus(1).on("h100-0").warned(NOW - 60, NOW + 1740)
    replacement = a_pod("nb").uid("new-uid").gpus(1).on("h100-0").warned(NOW - 5, NOW + 1795)
    kube = ScriptedKube(replacement.raw())
    assert clear_warning(runtime(kube), judged(judged_pod, Verdict.BUSY)) is False
    assert kube.patches == []
    assert kube.events == []


# --- reclaiming a bare pod ----------------------------------------------------------------------


class AllowingOpa:
    def decide(self, name: str, input: dict[str, Any]) -> Decision:
        return Decision(allow=True, reasons=("idle past its grace",))


class FailingDelete(ScriptedKube):
    def __init__(self, current: dict[str, Any], error: Exception) -> None:
        super().__init__(current, conflicts=0)
        self.error = error

    def delete(self, path: str, body: Any = None) -> Any:
        raise self.error


def bare_pod_reclaim() -> ReclaimPlan:
    built = a_pod("scratch").uid("scratch-uid").gpus(1).on("h100-0").warned(NOW - 2000, NOW - 200)
    facts = IdleFacts(
        window_seconds=3600,
        gpus=1,
        samples=240,
        expected_samples=228,
        max_util_percent=0.0,
        max_engine_active=None,
        max_fb_used_mib=512.0,
        fb_swing_mib=0.0,
    )
    judgement = PodJudgement(
        pod=built.build(),
        verdict=Verdict.RECLAIM,
        reason="GPU idle for 1h",
        rule=RULE,
        facts=facts,
        warned_at=NOW - 2000,
        deadline=NOW - 200,
    )
    target = Target(
        api_version="v1", kind="Pod", namespace="ml-research", name="scratch", method="delete"
    )
    return ReclaimPlan(target=target, pods=(judgement,))


def reclaim_runtime(kube: ScriptedKube) -> Runtime:
    rt = runtime(kube)
    rt.opa = AllowingOpa()  # type: ignore[assignment]
    return rt


def test_a_bare_pod_gets_its_reclaimed_event_after_the_delete() -> None:
    kube = ScriptedKube(a_pod("scratch").uid("scratch-uid").raw(), conflicts=0)
    assert reclaim(reclaim_runtime(kube), bare_pod_reclaim()) is True
    [(path, body)] = kube.deletes
    assert path == "/api/v1/namespaces/ml-research/pods/scratch"
    assert body == {"preconditions": {"uid": "scratch-uid"}}
    [event] = kube.events
    assert (event["reason"], event["involvedObject"]["uid"]) == ("IdleReclaimed", "scratch-uid")


@pytest.mark.parametrize(
    "error",
    [
        NotFoundError("DELETE pods/scratch: HTTP 404"),
        ConflictError("DELETE pods/scratch: HTTP 409: precondition failed: uid"),
    ],
)
def test_no_reclaimed_event_when_the_pod_is_gone_or_replaced(error: Exception) -> None:
    kube = FailingDelete(a_pod("scratch").raw(), error)
    assert reclaim(reclaim_runtime(kube), bare_pod_reclaim()) is False
    assert kube.events == []


def test_a_failed_delete_leaves_a_failure_event_not_a_reclaimed_one() -> None:
    kube = FailingDelete(a_pod("scratch").raw(), PermanentError("DELETE pods/scratch: HTTP 403"))
    rt = reclaim_runtime(kube)
    assert (
        rt.guarded(
            "idle", "reclaim", "Pod/ml-research/scratch", lambda: reclaim(rt, bare_pod_reclaim())
        )
        is None
    )
    [event] = kube.events
    assert event["reason"] == "IdleReclaimFailed"
    assert "HTTP 403" in event["message"]
    assert rt.summary.values  # the failure is counted


def test_a_dry_run_reports_a_held_workload() -> None:
    kube = ScriptedKube(a_pod("nb").raw(), conflicts=0)
    rt = runtime(kube)
    rt.settings = Settings(prometheus_url="http://unused", opa_url="http://unused", dry_run=True)
    rt.out = io.StringIO()
    target = Target(
        api_version="apps/v1",
        kind="Deployment",
        namespace="ml-research",
        name="nb",
        method="scale-to-zero",
    )
    reason = "workload has pods that were not judged idle: ml-research/nb-b (not-running)"
    act_on_idle(rt, IdlePlan(held=[(target, reason)]))
    assert f"DRY-RUN idle: would hold Deployment/ml-research/nb: {reason}" in rt.out.getvalue()
    assert kube.patches == [] and kube.events == []


# --- reclaiming an owner: still the one judged? -------------------------------------------------


class Objects(ScriptedKube):
    """get answers by path; merge_patch answers 409 `conflicts` times (after which `then`
    replaces the objects, as another writer would have), then echoes the object."""

    def __init__(
        self,
        objects: dict[str, dict[str, Any]],
        conflicts: int = 0,
        then: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        super().__init__({}, conflicts=conflicts)
        self.objects = objects
        self.then = then
        self.created: list[tuple[str, dict[str, Any]]] = []

    def get(self, path: str) -> dict[str, Any]:
        if path not in self.objects:
            raise NotFoundError(f"GET {path}: HTTP 404")
        return copy.deepcopy(self.objects[path])

    def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        if self.conflicts:
            self.conflicts -= 1
            if self.then is not None:
                self.objects = self.then
            raise ConflictError(f"PATCH {path}: HTTP 409: the object has been modified")
        self.patches.append((path, patch))
        return copy.deepcopy(self.objects[path])

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if "involvedObject" not in body:
            self.created.append((path, body))
        return super().create(path, body)


NS = "ml-research"
RS_PATH = f"/apis/apps/v1/namespaces/{NS}/replicasets/nb-5d8f7c"
DEPLOY_PATH = f"/apis/apps/v1/namespaces/{NS}/deployments/nb"


def owner_object(
    kind: str, name: str, uid: str, *, replicas: int = 1, owner_uid: str | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": NS, "uid": uid, "resourceVersion": "5"}
    if owner_uid is not None:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": "nb",
                "uid": owner_uid,
                "controller": True,
            }
        ]
    return {"kind": kind, "metadata": metadata, "spec": {"replicas": replicas}}


def deployment_objects(
    *, rs_uid: str = "o-nb-5d8f7c", deploy_uid: str = "d-1", replicas: int = 1
) -> dict[str, dict[str, Any]]:
    return {
        RS_PATH: owner_object("ReplicaSet", "nb-5d8f7c", rs_uid, owner_uid=deploy_uid),
        DEPLOY_PATH: owner_object("Deployment", "nb", deploy_uid, replicas=replicas),
    }


def reclaim_of(target: Target, *builders: Any) -> ReclaimPlan:
    template = bare_pod_reclaim().pods[0]
    pods = tuple(replace(template, pod=b.build()) for b in builders)
    return ReclaimPlan(target=target, pods=pods)


DEPLOYMENT = Target(
    api_version="apps/v1",
    kind="Deployment",
    namespace=NS,
    name="nb",
    method="scale-to-zero",
    via="nb-5d8f7c",
)


def nb_pod(name: str = "nb-a") -> Any:
    return a_pod(name).gpus(1).on("h100-0").of_deployment("nb").warned(NOW - 2000, NOW - 200)


def test_an_idle_deployment_is_scaled_to_zero_when_unchanged() -> None:
    kube = Objects(deployment_objects())
    assert reclaim(reclaim_runtime(kube), reclaim_of(DEPLOYMENT, nb_pod())) is True
    [(path, patch)] = kube.patches
    assert path == DEPLOY_PATH
    assert patch["spec"] == {"replicas": 0}
    assert patch["metadata"]["resourceVersion"] == "5"


@pytest.mark.parametrize(
    ("objects", "why"),
    [
        pytest.param(deployment_objects(replicas=2), "wants 2 replicas", id="replicas added"),
        pytest.param(
            deployment_objects(rs_uid="o-other"), "created again", id="deployment recreated"
        ),
        pytest.param(
            {**deployment_objects(), DEPLOY_PATH: owner_object("Deployment", "nb", "d-2")},
            "created again",
            id="deployment recreated, replica set adopted",
        ),
    ],
)
def test_a_deployment_changed_since_the_snapshot_is_not_scaled(
    objects: dict[str, dict[str, Any]], why: str
) -> None:
    kube = Objects(objects)
    rt = reclaim_runtime(kube)
    assert reclaim(rt, reclaim_of(DEPLOYMENT, nb_pod())) is False
    assert kube.patches == []
    assert kube.events == []
    assert rt.summary.get("actions", concern="idle", action="reclaim", outcome="changed") == 1


def test_replicas_added_while_a_scale_conflicted_stop_the_retry() -> None:
    kube = Objects(deployment_objects(), conflicts=1, then=deployment_objects(replicas=3))
    assert reclaim(reclaim_runtime(kube), reclaim_of(DEPLOYMENT, nb_pod())) is False
    assert kube.patches == []
    assert kube.events == []


def test_a_statefulset_created_again_under_the_same_name_is_not_scaled() -> None:
    path = f"/apis/apps/v1/namespaces/{NS}/statefulsets/db"
    kube = Objects({path: owner_object("StatefulSet", "db", "new-uid")})
    target = Target(
        api_version="apps/v1", kind="StatefulSet", namespace=NS, name="db", method="scale-to-zero"
    )
    pod = a_pod("db-0").gpus(1).on("h100-0").owned_by("StatefulSet", "db")  # owner uid o-db
    assert reclaim(reclaim_runtime(kube), reclaim_of(target, pod)) is False
    assert kube.patches == []


@pytest.mark.parametrize(
    ("api", "kind", "method"),
    [("batch/v1", "Job", "suspend"), ("batch.volcano.sh/v1alpha1", "VolcanoJob", "abort")],
)
def test_a_job_created_again_under_the_same_name_is_not_stopped(
    api: str, kind: str, method: str
) -> None:
    path = f"/apis/{api}/namespaces/{NS}/jobs/train"
    kube = Objects({path: owner_object("Job", "train", "new-uid")})
    target = Target(api_version=api, kind=kind, namespace=NS, name="train", method=method)
    pod = a_pod("train-0").gpus(1).on("h100-0").owned_by("Job", "train", api)
    assert reclaim(reclaim_runtime(kube), reclaim_of(target, pod)) is False
    assert kube.patches == []
    assert kube.created == []
    assert kube.events == []


class FailingPatch(Objects):
    def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        raise PermanentError(f"PATCH {path}: HTTP 403")


def test_an_aborted_volcano_job_gets_its_event_when_the_annotation_fails() -> None:
    api = "batch.volcano.sh/v1alpha1"
    kube = FailingPatch(
        {f"/apis/{api}/namespaces/{NS}/jobs/sweep": owner_object("Job", "sweep", "o-sweep")}
    )
    target = Target(api_version=api, kind="VolcanoJob", namespace=NS, name="sweep", method="abort")
    pod = a_pod("sweep-0").gpus(1).on("h100-0").owned_by("Job", "sweep", api)
    rt = reclaim_runtime(kube)
    assert reclaim(rt, reclaim_of(target, pod)) is True  # the abort happened
    [(_, command)] = kube.created
    assert command["action"] == "AbortJob"
    reasons = [
        (e["reason"], e["involvedObject"]["kind"]) for e in kube.events if "involvedObject" in e
    ]
    assert ("IdleReclaimed", "Job") in reasons
    assert ("IdleReclaimed", "Pod") in reasons
    assert rt.summary.get("errors", concern="idle", kind="permanent") == 1
