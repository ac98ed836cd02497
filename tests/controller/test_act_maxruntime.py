"""act.maxruntime against a scripted API and a scripted OPA: what a warning writes, what a stop
asks and writes, and that a denial or a dry run writes nothing."""

from __future__ import annotations

import io
from typing import Any

from controller.act.events import EventRecorder
from controller.act.maxruntime import act_on_runtime, stop, warn
from controller.act.opa import Decision
from controller.act.runtime import Runtime
from controller.config import LifetimeRules, Settings
from controller.decide.maxruntime import RuntimePlan, StopPlan, Verdict, judge
from controller.decide.workloads import reclaim_target
from controller.summary import Summary
from fleet import labels as keys
from tests.controller.builders import NOW, a_pod, fleet
from tests.controller.test_idle_writes import ScriptedKube

MAX = 86400
RULES = LifetimeRules()


def bounded(document: dict[str, Any]) -> None:
    document["workload_types"]["training"]["default_max_runtime_seconds"] = MAX


class ScriptedOpa:
    def __init__(self, allow: bool) -> None:
        self.allow = allow
        self.asked: list[tuple[str, dict[str, Any]]] = []

    def decide(self, name: str, input: dict[str, Any]) -> Decision:
        self.asked.append((name, input))
        return Decision(allow=self.allow, reasons=("because",) if self.allow else ("no",))


def runtime(kube: ScriptedKube, opa: ScriptedOpa, *, dry_run: bool = False) -> Runtime:
    return Runtime(
        kube=kube,  # type: ignore[arg-type]
        opa=opa,  # type: ignore[arg-type]
        fleet=fleet(bounded),
        settings=Settings(prometheus_url="http://unused", opa_url="http://unused", dry_run=dry_run),
        now=NOW,
        summary=Summary(dry_run=dry_run),
        out=io.StringIO(),
        events=EventRecorder(kube, dry_run=dry_run),  # type: ignore[arg-type]
    )


def job_pod(warned: float | None = None) -> Any:
    builder = (
        a_pod("run-0")
        .type("training")
        .gpus(8)
        .on("n1", started=NOW - MAX - 600)
        .owned_by("Job", "run", api_version="batch/v1")
    )
    if warned is not None:
        builder = builder.annotate(keys.RUNTIME_WARNED_AT, str(int(warned)))
    return builder


def owners() -> dict[Any, Any]:
    from controller.observe.owners import OwnerFacts, OwnerKey

    return {OwnerKey("batch/v1", "Job", "ml-research", "run", "o-run"): OwnerFacts(exists=True)}


def test_a_warning_writes_the_times_and_a_warning_event() -> None:
    pod = job_pod()
    kube = ScriptedKube(pod.raw(), conflicts=0)
    judgement = judge(pod.build(), fleet(bounded), owners(), NOW, RULES)
    assert judgement.verdict is Verdict.WARN
    assert warn(runtime(kube, ScriptedOpa(True)), judgement) is True
    [(_, patch)] = kube.patches
    assert patch["metadata"]["annotations"] == {
        keys.RUNTIME_WARNED_AT: str(int(NOW)),
        keys.STOP_DEADLINE: str(int(NOW) + 1800),
    }
    [event] = kube.events
    assert (event["reason"], event["type"]) == ("MaxRuntimeWarning", "Warning")
    assert "will be stopped after" in event["message"]


def test_a_stop_asks_the_policy_for_every_pod_then_suspends_the_job() -> None:
    pod = job_pod(warned=NOW - 1800)
    judgement = judge(pod.build(), fleet(bounded), owners(), NOW, RULES)
    assert judgement.verdict is Verdict.STOP
    job = {"metadata": {"name": "run", "uid": "o-run", "resourceVersion": "3"}, "spec": {}}
    kube = ScriptedKube(job, conflicts=0)
    opa = ScriptedOpa(True)
    item = StopPlan(target=reclaim_target(judgement.pod), pods=(judgement,))
    assert stop(runtime(kube, opa), item) is True
    assert [name for name, _ in opa.asked] == ["lifetime"]
    assert opa.asked[0][1]["action"] == "runtime-stop"
    [(path, patch)] = kube.patches
    assert path.endswith("/jobs/run") and patch["spec"] == {"suspend": True}
    assert sorted(e["reason"] for e in kube.events) == ["MaxRuntimeStopped", "MaxRuntimeStopped"]


def test_a_denied_stop_writes_nothing() -> None:
    judgement = judge(job_pod(warned=NOW - 1800).build(), fleet(bounded), owners(), NOW, RULES)
    kube = ScriptedKube({"metadata": {"uid": "o-run"}}, conflicts=0)
    item = StopPlan(target=reclaim_target(judgement.pod), pods=(judgement,))
    rt = runtime(kube, ScriptedOpa(False))
    assert stop(rt, item) is False
    assert (kube.patches, kube.events) == ([], [])
    assert (
        rt.summary.get("actions", concern="lifetime", action="runtime-stop", outcome="denied") == 1
    )


def test_dry_run_prints_and_writes_nothing() -> None:
    due = judge(job_pod(warned=NOW - 1800).build(), fleet(bounded), owners(), NOW, RULES)
    fresh = judge(job_pod().build(), fleet(bounded), owners(), NOW, RULES)
    kube = ScriptedKube({"metadata": {"uid": "o-run"}}, conflicts=0)
    rt = runtime(kube, ScriptedOpa(True), dry_run=True)
    plan = RuntimePlan(
        judgements=[due],
        warn=[fresh],
        stop=[StopPlan(target=reclaim_target(due.pod), pods=(due,))],
    )
    act_on_runtime(rt, plan)
    printed = rt.out.getvalue()  # type: ignore[attr-defined]
    assert "DRY-RUN lifetime: would runtime-warn ml-research/run-0" in printed
    assert "DRY-RUN lifetime: would runtime-stop (suspend) Job ml-research/run" in printed
    assert (kube.patches, kube.events, kube.deletes) == ([], [], [])
