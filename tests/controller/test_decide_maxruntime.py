"""decide.maxruntime: pure judgements of work past its type's maximum runtime (no cluster)."""

from __future__ import annotations

from typing import Any

from controller.config import LifetimeRules
from controller.decide.maxruntime import Verdict, judge, plan_runtime, stop_time
from controller.observe.owners import OwnerFacts, OwnerKey
from fleet import labels as keys
from tests.controller.builders import NOW, a_pod, fleet

MAX = 86400  # training's maximum runtime in these tests
RULES = LifetimeRules(
    stop_grace_seconds=1800, checkpoint_window_seconds=3600, checkpoint_slack_seconds=300
)


def bounded(document: dict[str, Any]) -> None:
    document["workload_types"]["training"]["default_max_runtime_seconds"] = MAX
    document["workload_types"]["inference"]["default_max_runtime_seconds"] = None


FLEET = fleet(bounded)


def training(name: str, *, ran: float = MAX + 600) -> Any:
    return a_pod(name).type("training").gpus(8).on("n1", started=NOW - ran)


def test_within_the_maximum_nothing_happens() -> None:
    assert judge(training("t", ran=MAX).build(), FLEET, {}, NOW, RULES).verdict is Verdict.WITHIN


def test_past_the_maximum_is_warned_with_the_grace_as_deadline() -> None:
    j = judge(training("t").build(), FLEET, {}, NOW, RULES)
    assert (j.verdict, j.deadline, j.stop_at) == (Verdict.WARN, NOW + 1800, NOW + 1800)
    assert "past the 86400s maximum of training" in j.reason


def test_warned_waits_out_the_grace_then_stops() -> None:
    waiting = training("t").annotate(keys.RUNTIME_WARNED_AT, str(int(NOW - 1000))).build()
    assert judge(waiting, FLEET, {}, NOW, RULES).verdict is Verdict.WAITING
    due = training("t").annotate(keys.RUNTIME_WARNED_AT, str(int(NOW - 1800))).build()
    j = judge(due, FLEET, {}, NOW, RULES)
    assert (j.verdict, j.warned_at, j.stop_at) == (Verdict.STOP, NOW - 1800, NOW)


def test_a_checkpointing_pod_is_stopped_after_its_next_checkpoint_window() -> None:
    # Checkpoints every 2400s, the last 1000s before the warning: the next is due 1400s after
    # the warning and written by 1700s, inside the 1800s grace: the grace decides.
    pod = (
        training("t")
        .annotate(keys.CHECKPOINT_INTERVAL_SECONDS, "2400")
        .checkpoint(NOW - 1000)
        .build()
    )
    assert stop_time(pod, NOW, RULES)[0] == NOW + 1800
    # Every 3000s, the last 500s before the warning: due at +2500, window over at +2800.
    pod = (
        training("t")
        .annotate(keys.CHECKPOINT_INTERVAL_SECONDS, "3000")
        .checkpoint(NOW - 500)
        .build()
    )
    assert stop_time(pod, NOW, RULES)[0] == NOW + 2800
    # A declared interval longer than the cap waits no longer than the cap.
    pod = (
        training("t")
        .annotate(keys.CHECKPOINT_INTERVAL_SECONDS, "86400")
        .checkpoint(NOW - 10)
        .build()
    )
    assert stop_time(pod, NOW, RULES)[0] == NOW - 10 + 3600 + 300
    # A location and no interval: the configured window.
    pod = training("t").annotate(keys.CHECKPOINT_LOCATION, "gs://b/run").build()
    assert stop_time(pod, NOW, RULES)[0] == NOW + 3900


def test_a_checkpoint_after_the_warning_ends_the_wait_at_the_grace() -> None:
    warned = NOW - 2000
    pod = (
        training("t")
        .annotate(keys.CHECKPOINT_INTERVAL_SECONDS, "3000")
        .annotate(keys.RUNTIME_WARNED_AT, str(int(warned)))
        .checkpoint(NOW - 100)
        .build()
    )
    j = judge(pod, FLEET, {}, NOW, RULES)
    assert (j.verdict, j.stop_at) == (Verdict.STOP, warned + 1800)
    without = (
        training("t")
        .annotate(keys.CHECKPOINT_INTERVAL_SECONDS, "3000")
        .annotate(keys.RUNTIME_WARNED_AT, str(int(warned)))
        .checkpoint(warned - 100)
    )
    j = judge(without.build(), FLEET, {}, NOW, RULES)
    assert (j.verdict, j.stop_at) == (Verdict.WAITING, warned + 2900 + 300)


def test_what_is_never_stopped() -> None:
    exempt = training("t").exempt().build()
    assert judge(exempt, FLEET, {}, NOW, RULES).verdict is Verdict.EXEMPT
    inference = a_pod("i").type("inference").gpus(1).on("n1", started=NOW - 10 * MAX).build()
    assert judge(inference, FLEET, {}, NOW, RULES).verdict is Verdict.UNBOUNDED
    unlabelled = a_pod("u").gpus(1).on("n1", started=NOW - 10 * MAX).build()
    assert judge(unlabelled, FLEET, {}, NOW, RULES).verdict is Verdict.UNBOUNDED
    raw = training("t").raw()
    raw["spec"]["activeDeadlineSeconds"] = 10 * MAX
    from controller.observe.model import pod_from_api

    assert judge(pod_from_api(raw), FLEET, {}, NOW, RULES).verdict is Verdict.OWN_DEADLINE
    pending = a_pod("p").type("training").gpus(1).pending(NOW - 10 * MAX).build()
    assert judge(pending, FLEET, {}, NOW, RULES).verdict is Verdict.NOT_RUNNING


def test_a_job_pod_needs_its_job_read() -> None:
    pod = training("j").owned_by("Job", "run", api_version="batch/v1").build()
    key = OwnerKey("batch/v1", "Job", "ml-research", "run", "o-run")
    assert judge(pod, FLEET, {}, NOW, RULES).verdict is Verdict.NO_EVIDENCE
    assert judge(pod, FLEET, {key: OwnerFacts(exists=True)}, NOW, RULES).verdict is Verdict.WARN
    own = {key: OwnerFacts(exists=True, active_deadline_seconds=10 * MAX)}
    assert judge(pod, FLEET, own, NOW, RULES).verdict is Verdict.OWN_DEADLINE


def gang_member(name: str, ran: float, warned: float | None) -> Any:
    builder = (
        a_pod(name)
        .type("training")
        .gpus(8)
        .on("n1", started=NOW - ran)
        .owned_by("Job", "gang", api_version="batch.volcano.sh/v1alpha1")
        .annotate("scheduling.k8s.io/group-name", "gang-pg")
    )
    if warned is not None:
        builder = builder.annotate(keys.RUNTIME_WARNED_AT, str(int(warned)))
    return builder.build()


def test_a_gang_is_as_old_as_its_oldest_member_and_stopped_whole() -> None:
    old = gang_member("g-0", MAX + 600, NOW - 1800)
    young = gang_member("g-1", 600, None)  # restarted: would not be past on its own
    plan = plan_runtime([old, young], FLEET, {}, NOW, RULES)
    assert [j.pod.name for j in plan.warn] == ["g-1"]
    assert plan.stop == []
    assert len(plan.held) == 1 and "g-1 (warn)" in plan.held[0][1]
    both = [old, gang_member("g-1", 600, NOW - 1800)]
    plan = plan_runtime(both, FLEET, {}, NOW, RULES)
    assert [(s.target.kind, s.target.name, len(s.pods)) for s in plan.stop] == [
        ("VolcanoJob", "gang", 2)
    ]


def test_a_deployment_with_one_replica_not_due_is_held() -> None:
    due = training("d-1").of_deployment("d").annotate(keys.RUNTIME_WARNED_AT, str(int(NOW - 1800)))
    fresh = training("d-2", ran=60).of_deployment("d")
    plan = plan_runtime([due.build(), fresh.build()], FLEET, {}, NOW, RULES)
    assert plan.stop == [] and plan.held[0][0].name == "d"
    plan = plan_runtime([due.build()], FLEET, {}, NOW, RULES)
    assert [(s.target.kind, s.target.method) for s in plan.stop] == [
        ("Deployment", "scale-to-zero")
    ]


def test_opa_input_carries_the_evidence() -> None:
    pod = training("t").annotate(keys.RUNTIME_WARNED_AT, str(int(NOW - 1800))).build()
    j = judge(pod, FLEET, {}, NOW, RULES)
    got = j.opa_input(NOW)
    assert got["action"] == "runtime-stop" and got["workload_type"] == "training"
    assert got["runtime"] == {
        "running_seconds": MAX + 600,
        "warned_at": int(NOW - 1800),
        "stop_at": int(NOW),
    }
