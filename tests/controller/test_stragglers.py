"""Gang stragglers: decide.stragglers (pure) and act.stragglers against a scripted API and OPA."""

from __future__ import annotations

from typing import Any

from controller.act.stragglers import act_on_stragglers, restart
from controller.config import LifetimeRules
from controller.decide.stragglers import (
    Utilisation,
    Verdict,
    expected_samples,
    needs_evidence,
    plan_stragglers,
)
from controller.decide.workloads import GANG_ANNOTATION
from controller.errors import TemporaryError
from fleet import labels as keys
from tests.controller.builders import NOW, a_pod
from tests.controller.test_orphans import Kube, Opa, runtime

RULES = LifetimeRules(straggler_window_seconds=1800, straggler_util_percent=5, busy_util_percent=50)
EXPECTED = expected_samples(1800, 15.0, 0.95)  # 114


def member(
    name: str, *, group: str = "vj", opt_in: bool = False, reported: float | None = None
) -> Any:
    builder = (
        a_pod(name)
        .type("training")
        .gpus(8)
        .on(f"node-{name}")
        .annotate(GANG_ANNOTATION, group)
        .owned_by("Job", group, "batch.volcano.sh/v1alpha1")
    )
    if opt_in:
        builder = builder.label(keys.STRAGGLER_ACTION, "restart")
    if reported is not None:
        builder = builder.annotate(keys.STRAGGLER_REPORTED_AT, str(int(reported)))
    return builder


def util(peak: float, mean: float, samples: int = 120) -> Utilisation:
    return Utilisation(peak_percent=peak, mean_percent=mean, samples=samples)


def gang_evidence(
    slow: Utilisation | None = None, **peers: Utilisation
) -> dict[tuple[str, str], Utilisation]:
    found = {("ml-research", "w-1"): util(80, 70), ("ml-research", "w-2"): util(95, 85)}
    if slow is not None:
        found[("ml-research", "w-0")] = slow
    for name, value in peers.items():
        found[("ml-research", name.replace("_", "-"))] = value
    return found


def three(**kw: Any) -> list[Any]:
    return [member("w-0", **kw).build(), member("w-1").build(), member("w-2").build()]


def verdict_of(
    pods: list[Any], evidence: dict[tuple[str, str], Utilisation], name: str = "w-0"
) -> Any:
    plan = plan_stragglers(pods, evidence, NOW, RULES, EXPECTED)
    return next(j for j in plan.judgements if j.pod.name == name)


def test_a_near_idle_member_with_busy_peers_is_a_straggler() -> None:
    j = verdict_of(three(), gang_evidence(util(3, 1)))
    assert j.verdict is Verdict.STRAGGLER and j.gang == "ml-research/vj"
    assert "peak utilisation 3% (at most 5%)" in j.reason
    assert [key for key, _ in j.peers] == ["ml-research/w-1", "ml-research/w-2"]
    # the thresholds are inclusive: peak at the line, peers at the busy line
    edge = gang_evidence(util(5, 2), w_1=util(60, 50))
    assert verdict_of(three(), edge).verdict is Verdict.STRAGGLER
    # the busy peers themselves are active
    assert verdict_of(three(), gang_evidence(util(3, 1)), "w-1").verdict is Verdict.ACTIVE


def test_a_member_above_the_line_or_peers_not_busy_is_no_straggler() -> None:
    assert verdict_of(three(), gang_evidence(util(5.1, 1))).verdict is Verdict.ACTIVE
    not_busy = gang_evidence(util(3, 1), w_2=util(60, 49.9))
    j = verdict_of(three(), not_busy)
    assert j.verdict is Verdict.PEERS_NOT_BUSY and "ml-research/w-2 mean 49.9%" in j.reason


def test_missing_or_partial_evidence_is_unknown_never_a_straggler() -> None:
    # the pod's own series missing, or short of the window's samples
    assert verdict_of(three(), gang_evidence(None)).verdict is Verdict.UNKNOWN
    partial = verdict_of(three(), gang_evidence(util(3, 1, samples=EXPECTED - 1)))
    assert partial.verdict is Verdict.UNKNOWN and f"{EXPECTED - 1} samples" in partial.reason
    # a peer's series missing or partial
    no_peer = gang_evidence(util(3, 1))
    del no_peer[("ml-research", "w-2")]
    j = verdict_of(three(), no_peer)
    assert j.verdict is Verdict.UNKNOWN and "peer ml-research/w-2" in j.reason
    short = gang_evidence(util(3, 1), w_1=util(90, 90, samples=10))
    assert verdict_of(three(), short).verdict is Verdict.UNKNOWN
    # a peer still pending has no evidence: the gang is not all there
    pods = [*three()[:2], member("w-2").pending(NOW - 60).build()]
    assert verdict_of(pods, gang_evidence(util(3, 1))).verdict is Verdict.UNKNOWN
    # no evidence at all: nothing is reported
    plan = plan_stragglers(three(), {}, NOW, RULES, EXPECTED)
    assert {j.verdict for j in plan.judgements} == {Verdict.UNKNOWN}
    assert plan.report == [] and plan.restart == []


def test_only_gangs_of_running_members_are_judged() -> None:
    alone = [member("w-0").build()]
    assert plan_stragglers(alone, gang_evidence(util(3, 1)), NOW, RULES, EXPECTED).judgements == []
    bare = [a_pod("x").gpus(1).on("n").build(), a_pod("y").gpus(1).on("n").build()]
    assert plan_stragglers(bare, {}, NOW, RULES, EXPECTED).judgements == []
    assert needs_evidence(three()) and not needs_evidence(alone) and not needs_evidence(bare)
    other_gangs = [member("w-0").build(), member("w-1", group="other").build()]
    assert not needs_evidence(other_gangs)


def test_reported_once_per_window_then_restarted_only_when_opted_in() -> None:
    evidence = gang_evidence(util(3, 1))
    reported = three(reported=NOW - 600)
    plan = plan_stragglers(reported, evidence, NOW, RULES, EXPECTED)
    assert [j.verdict for j in plan.judgements if j.pod.name == "w-0"] == [Verdict.REPORTED]
    assert plan.report == [] and plan.restart == []  # report only by default
    opted = plan_stragglers(three(reported=NOW - 600, opt_in=True), evidence, NOW, RULES, EXPECTED)
    assert [j.pod.name for j in opted.restart] == ["w-0"]
    # first seen while opted in: reported first, never restarted unannounced
    first = plan_stragglers(three(opt_in=True), evidence, NOW, RULES, EXPECTED)
    assert [j.pod.name for j in first.report] == ["w-0"] and first.restart == []
    # the window over since the report: reported again
    again = plan_stragglers(three(reported=NOW - 1800), evidence, NOW, RULES, EXPECTED)
    assert [j.pod.name for j in again.report] == ["w-0"]


def test_a_bare_pod_is_never_restarted() -> None:
    pods = [
        a_pod("w-0")
        .gpus(8)
        .on("n0")
        .annotate(GANG_ANNOTATION, "vj")
        .label(keys.STRAGGLER_ACTION, "restart")
        .annotate(keys.STRAGGLER_REPORTED_AT, str(int(NOW - 60)))
        .build(),
        *three()[1:],
    ]
    plan = plan_stragglers(pods, gang_evidence(util(3, 1)), NOW, RULES, EXPECTED)
    assert plan.restart == [] and [j.pod.name for j in plan.held] == ["w-0"]


def test_opa_input_carries_the_evidence() -> None:
    j = verdict_of(three(reported=NOW - 600, opt_in=True), gang_evidence(util(3, 1)))
    got = j.opa_input(NOW, RULES)
    assert got["action"] == "straggler-restart"
    assert got["straggler"]["peak_util_percent"] == 3 and got["straggler"]["reported_at"] == int(
        NOW - 600
    )
    assert got["straggler"]["peers"][0] == {
        "pod": "ml-research/w-1",
        "mean_util_percent": 70,
        "samples": 120,
    }
    assert got["pod"]["metadata"]["ownerReferences"][0]["controller"] is True


# --- act ------------------------------------------------------------------------------------


def test_report_writes_the_time_and_a_warning_event_once() -> None:
    kube = Kube({})
    rt = runtime(kube, Opa())
    plan = plan_stragglers(three(), gang_evidence(util(3, 1)), NOW, RULES, EXPECTED)
    assert act_on_stragglers(rt, plan) == set()
    [(path, patch)] = kube.patches
    assert path.endswith("/pods/w-0")
    assert patch["metadata"]["annotations"][keys.STRAGGLER_REPORTED_AT] == str(int(NOW))
    [event] = kube.events
    assert (event["reason"], event["type"]) == ("Straggler", "Warning")
    assert "reported only" in event["message"]
    assert kube.deletes == []
    assert rt.summary.get("lifetime_pods", check="straggler", verdict="straggler") == 1
    assert rt.summary.get("lifetime_pods", check="straggler", verdict="active") == 2


def test_restart_deletes_the_pod_with_its_uid_after_the_policy() -> None:
    kube, opa = Kube({}), Opa()
    plan = plan_stragglers(
        three(reported=NOW - 600, opt_in=True), gang_evidence(util(3, 1)), NOW, RULES, EXPECTED
    )
    rt = runtime(kube, opa)
    assert act_on_stragglers(rt, plan) == {plan.restart[0].pod.uid}
    assert opa.asked[0]["action"] == "straggler-restart"
    [(path, body)] = kube.deletes
    assert path.endswith("/pods/w-0") and body["preconditions"]["uid"] == plan.restart[0].pod.uid
    assert [e["reason"] for e in kube.events] == ["StragglerRestarted"]
    assert kube.patches == []


def test_denied_dry_run_or_failing_restart_deletes_nothing() -> None:
    plan = plan_stragglers(
        three(reported=NOW - 600, opt_in=True), gang_evidence(util(3, 1)), NOW, RULES, EXPECTED
    )
    kube = Kube({})
    rt = runtime(kube, Opa(allow=False))
    assert restart(rt, plan.restart[0]) is False
    assert (
        rt.summary.get("actions", concern="lifetime", action="straggler-restart", outcome="denied")
        == 1
    )
    dry = runtime(kube, Opa(), dry_run=True)
    assert restart(dry, plan.restart[0]) is True
    assert kube.deletes == [] and kube.events == []
    assert "DRY-RUN lifetime: would straggler-restart ml-research/w-0" in dry.out.getvalue()  # type: ignore[attr-defined]

    class Failing(Kube):
        def delete(self, path: str, body: Any = None) -> Any:
            raise TemporaryError("DELETE: timeout")

    failing = Failing({})
    rt = runtime(failing, Opa())
    assert act_on_stragglers(rt, plan) == set()
    assert [e["reason"] for e in failing.events] == ["StragglerRestartFailed"]
    assert (
        rt.summary.get("actions", concern="lifetime", action="straggler-restart", outcome="failed")
        == 1
    )


def test_dry_run_report_writes_nothing() -> None:
    kube = Kube({})
    rt = runtime(kube, Opa(), dry_run=True)
    plan = plan_stragglers(three(), gang_evidence(util(3, 1)), NOW, RULES, EXPECTED)
    act_on_stragglers(rt, plan)
    assert kube.patches == [] and kube.events == []
    assert "DRY-RUN lifetime: would straggler-report ml-research/w-0" in rt.out.getvalue()  # type: ignore[attr-defined]
