"""The lifetime concern end to end: real control plane (kwok GPU nodes, the Job and garbage
collectors), real OPA with the project's policies, real Prometheus backfilled with DCGM series.
Short windows (the test's `lifetime` section) and an injected clock keep it fast."""

from __future__ import annotations

import json
from typing import Any

import pytest

from localfleet.servers import Sample
from tests.controller.conftest import (
    Harness,
    annotations_of,
    bare_pod,
    dcgm,
    job,
    started_at,
    wait_for,
)

pytestmark = pytest.mark.integration

STOP_GRACE = 60
CHECKPOINT_WINDOW = 120
CHECKPOINT_SLACK = 30
ORPHAN_GRACE = 60
STRAGGLER_WINDOW = 600
TRAINING_MAX = 86400  # the local stack's training maximum runtime


def short_lifetime(h: Harness) -> None:
    """Small timers, in the controller's document and in OPA's (the policy reads them too)."""
    h.document["lifetime"] = {
        **h.document["lifetime"],
        "stop_grace_seconds": STOP_GRACE,
        "checkpoint_window_seconds": CHECKPOINT_WINDOW,
        "checkpoint_slack_seconds": CHECKPOINT_SLACK,
        "orphan_grace_seconds": ORPHAN_GRACE,
        "straggler_window_seconds": STRAGGLER_WINDOW,
    }
    h.opa.put_data("fleetplane/config", h.document)


def own_errors(run: Any) -> list[dict[str, Any]]:
    """The pass's error lines about this test's namespace. The cluster is shared by the whole
    session and the clock jumps a day ahead, so other tests' leftover work (in namespaces being
    deleted) is judged too; what goes wrong there is not this test's."""
    return [
        line
        for line in run.logs
        if line.get("level") == "error" and f"{run.namespace}/" in json.dumps(line)
    ]


def lifetime_pods(run: Any, check: str, verdict: str) -> float:
    return run.summary.get("lifetime_pods", check=check, verdict=verdict) or 0


def test_a_job_past_its_maximum_runtime_is_warned_then_stopped_after_its_checkpoint(
    harness: Harness,
) -> None:
    h = harness
    short_lifetime(h)
    train = job("train", "training")
    train["spec"]["template"]["metadata"]["annotations"] = {
        "fleetplane.dev/checkpoint-location": "s3://checkpoints/train"
    }
    h.create(train)
    [pod] = h.wait_running("job-name=train")
    name = pod["metadata"]["name"]
    warned = started_at(pod) + TRAINING_MAX + 10

    run = h.run(warned, concerns=("lifetime",))
    assert own_errors(run) == []
    assert run.actions("lifetime.runtime-warn") == 1
    found = annotations_of(h.pod(name))
    assert found["fleetplane.dev/runtime-warned-at"] == str(int(warned))
    assert found["fleetplane.dev/stop-deadline"] == str(int(warned) + STOP_GRACE)
    assert "MaxRuntimeWarning" in h.reasons(name)

    # Past the grace, inside the checkpoint window (it checkpoints, no interval declared: the
    # window, then the slack): nothing is stopped.
    run = h.run(warned + STOP_GRACE + 10, concerns=("lifetime",))
    assert run.actions("lifetime.runtime-stop") == 0
    assert lifetime_pods(run, "max-runtime", "waiting") >= 1
    assert not h.get("batch/v1", "jobs", "train")["spec"].get("suspend")

    run = h.run(warned + CHECKPOINT_WINDOW + CHECKPOINT_SLACK + 1, concerns=("lifetime",))
    assert own_errors(run) == []
    assert run.actions("lifetime.runtime-stop") == 1
    assert h.get("batch/v1", "jobs", "train")["spec"]["suspend"] is True
    assert "MaxRuntimeStopped" in h.reasons("train")
    assert "MaxRuntimeStopped" in h.reasons(name)


def test_an_orphaned_pod_holding_gpus_is_reclaimed_after_the_grace(harness: Harness) -> None:
    h = harness
    short_lifetime(h)
    h.create(job("lost", "training"))
    [pod] = h.wait_running("job-name=lost")
    name = pod["metadata"]["name"]
    # The Job is deleted, its pod orphaned (the garbage collector lets go of it).
    h.client.delete(
        f"/apis/batch/v1/namespaces/{h.namespace}/jobs/lost", {"propagationPolicy": "Orphan"}
    )
    wait_for(lambda: not h.pod(name)["metadata"].get("ownerReferences"), 30)
    wait_for(lambda: not h.client.list(f"/apis/batch/v1/namespaces/{h.namespace}/jobs"), 30)
    found = started_at(pod) + 600

    run = h.run(found, concerns=("lifetime",))
    assert own_errors(run) == []
    assert annotations_of(h.pod(name))["fleetplane.dev/orphan-found-at"] == str(int(found))
    assert "OrphanFound" in h.reasons(name)

    run = h.run(found + ORPHAN_GRACE - 10, concerns=("lifetime",))  # inside the grace
    assert run.actions("lifetime.orphan-reclaim") == 0
    assert h.pod(name)["metadata"].get("deletionTimestamp") is None

    run = h.run(found + ORPHAN_GRACE + 1, concerns=("lifetime",))
    assert own_errors(run) == []
    assert run.actions("lifetime.orphan-reclaim") == 1
    wait_for(lambda: not h.pods("job-name=lost"), 30)
    assert "OrphanReclaimed" in h.reasons(name)


def gang(h: Harness) -> list[dict[str, Any]]:
    """A Volcano Job's three workers (Volcano's controllers do not run here: its pods are
    created the way it would), all opted in to a straggler restart."""
    vcjob = h.client.create(
        f"/apis/batch.volcano.sh/v1alpha1/namespaces/{h.namespace}/jobs",
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "vj", "namespace": h.namespace},
            "spec": {
                "schedulerName": "volcano",
                "minAvailable": 3,
                "tasks": [{"name": "worker", "replicas": 3}],
            },
        },
    )
    for index in range(3):
        worker = bare_pod(f"vj-worker-{index}", "training")
        worker["metadata"]["labels"].update(
            {"app": "vj", "fleetplane.dev/straggler-action": "restart"}
        )
        worker["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "vj"}
        worker["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "name": "vj",
                "uid": vcjob["metadata"]["uid"],
                "controller": True,
            }
        ]
        h.create(worker)
    return h.wait_running("app=vj", count=3)


def test_stragglers_need_whole_evidence_and_are_reported_before_any_restart(
    harness: Harness, prometheus_factory: Any
) -> None:
    h = harness
    short_lifetime(h)
    pods = {p["metadata"]["name"]: p for p in gang(h)}
    now = max(started_at(p) for p in pods.values()) + STRAGGLER_WINDOW + 30

    def untouched() -> None:
        for name in pods:
            current = h.pod(name)
            assert current["metadata"].get("deletionTimestamp") is None, name
            assert "fleetplane.dev/straggler-reported-at" not in annotations_of(current), name
            assert not {"Straggler", "StragglerRestarted"} & set(h.reasons(name)), name

    # No Prometheus at all: every member is unknown, nothing is reported or restarted, and the
    # rest of the concern (runtime, orphans) still ran.
    run = h.run(now, concerns=("lifetime",))
    assert len(run.mine("lifetime.straggler.unknown")) == 3
    assert any(line["event"] == "lifetime.straggler.metrics-unavailable" for line in run.logs)
    assert run.summary.get("errors", concern="lifetime", kind="temporary") == 1
    assert lifetime_pods(run, "max-runtime", "within") >= 3
    untouched()

    # Prometheus answers, but without these pods' series (another pod's only).
    other = dcgm("elsewhere", h.namespace, "node-x", now - STRAGGLER_WINDOW - 60, now + 120)
    h.prometheus_url = prometheus_factory(other).url
    run = h.run(now, concerns=("lifetime",))
    assert own_errors(run) == []
    assert len(run.mine("lifetime.straggler.unknown")) == 3
    untouched()

    # The evidence: worker 0 idle, its peers busy, over the whole window.
    samples: list[Sample] = []
    for name, pod in pods.items():
        util = 1.0 if name == "vj-worker-0" else 90.0
        samples += dcgm(
            name,
            h.namespace,
            pod["spec"]["nodeName"],
            now - STRAGGLER_WINDOW - 60,
            now + 120,
            util=util,
        )
    h.prometheus_url = prometheus_factory(samples).url
    run = h.run(now, concerns=("lifetime",))
    assert own_errors(run) == []
    assert run.actions("lifetime.straggler-report") == 1
    assert lifetime_pods(run, "straggler", "straggler") == 1
    assert lifetime_pods(run, "straggler", "active") == 2
    slow = h.pod("vj-worker-0")
    assert annotations_of(slow)["fleetplane.dev/straggler-reported-at"] == str(int(now))
    assert "Straggler" in h.reasons("vj-worker-0")
    assert slow["metadata"].get("deletionTimestamp") is None  # reported first, not restarted

    # Still straggling on the next pass, opted in: the policy allows the restart.
    run = h.run(now + 60, concerns=("lifetime",))
    assert own_errors(run) == []
    assert run.actions("lifetime.straggler-restart") == 1
    wait_for(lambda: len(h.pods("app=vj")) == 2, 30)
    assert "StragglerRestarted" in h.reasons("vj-worker-0")
    assert {p["metadata"]["name"] for p in h.pods("app=vj")} == {"vj-worker-1", "vj-worker-2"}
