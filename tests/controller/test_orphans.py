"""Orphaned and failed work: decide.orphans (pure), observe.owners' reading of owners, and
act.orphans against a scripted API and OPA."""

from __future__ import annotations

import io
from typing import Any

from controller.act.events import EventRecorder
from controller.act.opa import Decision
from controller.act.orphans import act_on_orphans, reclaim
from controller.act.runtime import Runtime
from controller.config import LifetimeRules, Settings
from controller.decide.orphans import Verdict, judge, plan_orphans
from controller.errors import NotFoundError, TemporaryError
from controller.observe.owners import OwnerFacts, OwnerKey, facts_from_object, owner_key
from controller.summary import Summary
from fleet import labels as keys
from tests.controller.builders import NOW, a_pod, fleet

RULES = LifetimeRules(orphan_grace_seconds=300)
JOB = OwnerKey("batch/v1", "Job", "ml-research", "run", "o-run")


def job_pod(found: float | None = None) -> Any:
    builder = a_pod("run-0").type("training").gpus(8).on("n1").owned_by("Job", "run", "batch/v1")
    if found is not None:
        builder = builder.annotate(keys.ORPHAN_FOUND_AT, str(int(found)))
    return builder


def test_owner_gone_is_marked_then_reclaimed_after_the_grace() -> None:
    gone = {JOB: OwnerFacts(exists=False)}
    j = judge(job_pod().build(), gone, NOW, RULES)
    assert (j.verdict, j.orphan) == (Verdict.MARK, "owner-gone")
    assert judge(job_pod(NOW - 299).build(), gone, NOW, RULES).verdict is Verdict.WAITING
    j = judge(job_pod(NOW - 300).build(), gone, NOW, RULES)
    assert (j.verdict, j.found_at) == (Verdict.RECLAIM, NOW - 300)


def test_a_failed_job_and_an_owner_created_again_are_orphans() -> None:
    failed = {JOB: OwnerFacts(exists=True, failed=True, failed_reason="BackoffLimitExceeded")}
    j = judge(job_pod().build(), failed, NOW, RULES)
    assert (j.verdict, j.orphan) == (Verdict.MARK, "job-failed")
    again = {JOB: OwnerFacts(exists=False, found_uid="new-uid")}
    j = judge(job_pod().build(), again, NOW, RULES)
    assert j.orphan == "owner-gone" and "created again" in j.reason


def test_missing_evidence_is_never_an_orphan() -> None:
    # The owner could not be read (absent from the facts): nothing is marked or reclaimed,
    # not even a pod marked before.
    assert judge(job_pod().build(), {}, NOW, RULES).verdict is Verdict.NO_EVIDENCE
    assert judge(job_pod(NOW - 3600).build(), {}, NOW, RULES).verdict is Verdict.NO_EVIDENCE
    bare = a_pod("bare").type("training").gpus(1).on("n1").build()
    assert judge(bare, {}, NOW, RULES).verdict is Verdict.NOT_OWNED
    other = a_pod("o").gpus(1).on("n1").owned_by("RayCluster", "r", "ray.io/v1").build()
    assert owner_key(other) is None
    assert judge(other, {}, NOW, RULES).verdict is Verdict.NOT_OWNED


def test_what_holds_nothing_or_is_exempt_is_left_alone() -> None:
    gone = {JOB: OwnerFacts(exists=False)}
    finished = job_pod().finished(NOW - 60).build()
    assert judge(finished, gone, NOW, RULES).verdict is Verdict.NOT_HOLDING
    deleting = job_pod().deleting().build()
    assert judge(deleting, gone, NOW, RULES).verdict is Verdict.NOT_HOLDING
    exempt = job_pod().exempt().build()
    assert judge(exempt, gone, NOW, RULES).verdict is Verdict.EXEMPT


def test_an_owner_back_clears_the_mark() -> None:
    plan = plan_orphans([job_pod(NOW - 100).build()], {JOB: OwnerFacts(exists=True)}, NOW, RULES)
    assert [j.pod.name for j in plan.clear] == ["run-0"] and plan.reclaim == []


def test_a_released_job_pod_is_found_by_its_labels() -> None:
    pod = (
        a_pod("x")
        .gpus(1)
        .on("n1")
        .label("batch.kubernetes.io/controller-uid", "u-1")
        .label("batch.kubernetes.io/job-name", "run")
        .build()
    )
    assert owner_key(pod) == OwnerKey("batch/v1", "Job", "ml-research", "run", "u-1")
    volcano = a_pod("v").gpus(1).on("n1").label("volcano.sh/job-name", "vj").build()
    assert owner_key(volcano) == OwnerKey(
        "batch.volcano.sh/v1alpha1", "Job", "ml-research", "vj", ""
    )


def test_owner_facts_from_the_objects() -> None:
    failed_job = {
        "metadata": {"uid": "o-run"},
        "spec": {"activeDeadlineSeconds": 600},
        "status": {
            "conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]
        },
    }
    facts = facts_from_object(JOB, failed_job)
    assert (facts.exists, facts.failed, facts.active_deadline_seconds) == (True, True, 600)
    assert facts_from_object(JOB, {"metadata": {"uid": "other"}}).exists is False
    vj = OwnerKey("batch.volcano.sh/v1alpha1", "Job", "ml-research", "vj", "u")
    state = {"metadata": {"uid": "u"}, "status": {"state": {"phase": "Failed"}}}
    assert facts_from_object(vj, state).failed is True
    running = {"metadata": {"uid": "u"}, "status": {"state": {"phase": "Running"}}}
    assert facts_from_object(vj, running).failed is False


# --- act ------------------------------------------------------------------------------------


class Kube:
    """GET answers `owner` (an object, or an exception to raise); writes are recorded."""

    def __init__(self, owner: Any) -> None:
        self.owner = owner
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.events: list[dict[str, Any]] = []
        self.deletes: list[tuple[str, Any]] = []

    def get(self, path: str) -> dict[str, Any]:
        if isinstance(self.owner, Exception):
            raise self.owner
        return dict(self.owner)

    def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patches.append((path, patch))
        return {}

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.events.append(body)
        return body

    def delete(self, path: str, body: Any = None) -> Any:
        self.deletes.append((path, body))
        return {}


class Opa:
    def __init__(self, allow: bool = True) -> None:
        self.allow = allow
        self.asked: list[dict[str, Any]] = []

    def decide(self, name: str, input: dict[str, Any]) -> Decision:
        assert name == "lifetime"
        self.asked.append(input)
        return Decision(allow=self.allow, reasons=("ok",))


def runtime(kube: Kube, opa: Opa, *, dry_run: bool = False) -> Runtime:
    return Runtime(
        kube=kube,  # type: ignore[arg-type]
        opa=opa,  # type: ignore[arg-type]
        fleet=fleet(),
        settings=Settings(prometheus_url="http://unused", opa_url="http://unused", dry_run=dry_run),
        now=NOW,
        summary=Summary(dry_run=dry_run),
        out=io.StringIO(),
        events=EventRecorder(kube, dry_run=dry_run),  # type: ignore[arg-type]
    )


def due() -> Any:
    return judge(job_pod(NOW - 600).build(), {JOB: OwnerFacts(exists=False)}, NOW, RULES)


def test_reclaim_deletes_the_pod_with_its_uid_and_records_an_event() -> None:
    kube, opa = Kube(NotFoundError("GET: 404")), Opa()
    assert reclaim(runtime(kube, opa), due()) is True
    assert opa.asked[0]["orphan"]["reason"] == "owner-gone"
    [(path, body)] = kube.deletes
    assert path.endswith("/pods/run-0") and body["preconditions"]["uid"]
    assert [e["reason"] for e in kube.events] == ["OrphanReclaimed"]


def test_reclaim_reads_the_owner_again_and_acts_on_no_doubt() -> None:
    back = Kube({"metadata": {"uid": "o-run"}, "status": {}})
    assert reclaim(runtime(back, Opa()), due()) is False
    assert back.deletes == [] and back.events == []
    unreadable = Kube(TemporaryError("GET: timeout"))
    rt = runtime(unreadable, Opa())
    act_on_orphans(rt, plan_orphans([due().pod], {JOB: OwnerFacts(exists=False)}, NOW, RULES))
    assert unreadable.deletes == []
    assert rt.summary.get("actions", concern="lifetime", action="orphan-reclaim", outcome="failed")


def test_denied_or_dry_run_deletes_nothing() -> None:
    kube = Kube(NotFoundError("GET: 404"))
    assert reclaim(runtime(kube, Opa(allow=False)), due()) is False
    rt = runtime(kube, Opa(), dry_run=True)
    assert reclaim(rt, due()) is True
    assert kube.deletes == [] and kube.events == []
    assert "DRY-RUN lifetime: would orphan-reclaim ml-research/run-0" in rt.out.getvalue()  # type: ignore[attr-defined]


def test_marking_writes_the_time_and_a_warning_event() -> None:
    kube = Kube(NotFoundError("GET: 404"))
    plan = plan_orphans([job_pod().build()], {JOB: OwnerFacts(exists=False)}, NOW, RULES)
    act_on_orphans(runtime(kube, Opa()), plan)
    [(_, patch)] = kube.patches
    assert patch["metadata"]["annotations"][keys.ORPHAN_FOUND_AT] == str(int(NOW))
    [event] = kube.events
    assert (event["reason"], event["type"]) == ("OrphanFound", "Warning")
