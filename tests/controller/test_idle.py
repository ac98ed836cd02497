"""Idle reclamation end to end: real control plane (kwok GPU nodes), real OPA with the project's
policies, real Prometheus backfilled with DCGM series."""

from __future__ import annotations

from typing import Any

import pytest

from localfleet.servers import Sample
from tests.controller.conftest import (
    GRACE,
    SCRAPE,
    WINDOW,
    Harness,
    annotations_of,
    bare_pod,
    dcgm,
    deployment,
    job,
    started_at,
    wait_for,
)

pytestmark = pytest.mark.integration

WARNED = "fleetplane.dev/idle-warned-at"
DEADLINE = "fleetplane.dev/reclaim-deadline"


def volcano_job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": 1,
            "tasks": [{"name": "worker", "replicas": 1}],
        },
    }


def test_idle_workloads_are_warned_then_reclaimed_the_least_destructive_way(
    harness: Harness, prometheus_factory: Any
) -> None:
    h = harness
    h.create(deployment("nb", "notebook"))
    h.create(job("train", "training"))
    vcjob = h.client.create(
        f"/apis/batch.volcano.sh/v1alpha1/namespaces/{h.namespace}/jobs",
        {**volcano_job("sweep"), "metadata": {"name": "sweep", "namespace": h.namespace}},
    )
    # Volcano's job controller is not running here: create its pod the way it would.
    sweep_pod = bare_pod("sweep-worker-0", "batch")
    sweep_pod["metadata"]["labels"]["app"] = "sweep"
    sweep_pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "name": "sweep",
            "uid": vcjob["metadata"]["uid"],
            "controller": True,
        }
    ]
    h.create(sweep_pod)
    scratch = bare_pod("scratch", "notebook")
    scratch["metadata"]["labels"]["app"] = "scratch"
    h.create(scratch)

    pods = {
        p["metadata"]["name"]: p for p in h.wait_running("fleetplane.dev/workload-type", count=4)
    }
    t1 = max(started_at(p) for p in pods.values()) + WINDOW + 30
    end = t1 + GRACE + 120
    samples: list[Sample] = []
    for name, pod in pods.items():
        samples += dcgm(name, h.namespace, pod["spec"]["nodeName"], t1 - WINDOW - 60, end)
    h.prometheus_url = prometheus_factory(samples).url

    run = h.run(t1, concerns=("idle",))
    assert run.summary.errors == 0
    assert run.actions("idle.warn") == 4
    for name in pods:
        found = annotations_of(h.pod(name))
        assert found[WARNED] == str(int(t1)), name
        assert found[DEADLINE] == str(int(t1) + GRACE), name
        assert "IdleWarning" in h.reasons(name), name

    run = h.run(t1 + 100, concerns=("idle",))  # inside the grace period: nothing
    assert run.verdicts() == {"waiting": 4}
    assert all(annotations_of(h.pod(name))[WARNED] == str(int(t1)) for name in pods)

    run = h.run(t1 + GRACE + 10, concerns=("idle",))
    assert run.summary.errors == 0, run.summary.as_dict()
    assert run.actions("idle.reclaim") == 4

    nb = h.get("apps/v1", "deployments", "nb")
    assert nb["spec"]["replicas"] == 0
    assert annotations_of(nb)["fleetplane.dev/reclaimed-replicas"] == "1"
    assert "IdleReclaimed" in h.reasons("nb")
    assert h.get("batch/v1", "jobs", "train")["spec"]["suspend"] is True
    assert "IdleReclaimed" in h.reasons("train")

    def sweep_aborted() -> bool:
        """The AbortJob Command is there, or (when a Volcano controller of the shared control
        plane runs, and consumes the Command) the Volcano Job is aborting."""
        path = f"/apis/bus.volcano.sh/v1alpha1/namespaces/{h.namespace}/commands"
        commands = [(c["action"], c["target"]["name"]) for c in h.client.list(path)]
        if commands == [("AbortJob", "sweep")]:
            return True
        state = (h.get("batch.volcano.sh/v1alpha1", "jobs", "sweep").get("status") or {}).get(
            "state"
        ) or {}
        return state.get("phase") in ("Aborting", "Aborted")

    wait_for(sweep_aborted, 30)
    wait_for(lambda: not h.pods("app=scratch"), 30)  # the bare pod was deleted, last resort
    assert "IdleReclaimed" in h.reasons("scratch")

    # A further pass finds nothing left to do.
    run = h.run(t1 + GRACE + 40, concerns=("idle",))
    assert run.actions("idle.reclaim") == 0
    assert (
        len(h.client.list(f"/apis/bus.volcano.sh/v1alpha1/namespaces/{h.namespace}/commands")) == 1
    )


def test_busy_exempt_and_unmeasured_workloads_are_left_alone(
    harness: Harness, prometheus_factory: Any
) -> None:
    h = harness
    h.create(job("busy", "training"))
    h.create(deployment("serve", "inference"))
    h.create(deployment("pinned", "notebook", labels={"fleetplane.dev/exempt": "true"}))
    h.create(deployment("dark", "notebook"))
    h.create(deployment("half", "notebook"))
    pods = {
        p["metadata"]["labels"].get("app") or "busy": p
        for p in h.wait_running("fleetplane.dev/workload-type", count=5)
    }
    t1 = max(started_at(p) for p in pods.values()) + WINDOW + 30
    end = t1 + 2 * GRACE

    def series(app: str, start: float, **kwargs: Any) -> list[Sample]:
        pod = pods[app]
        return dcgm(
            pod["metadata"]["name"], h.namespace, pod["spec"]["nodeName"], start, end, **kwargs
        )

    samples = (
        series("busy", t1 - WINDOW - 60, util=80.0)
        + series("serve", t1 - WINDOW - 60)
        + series("pinned", t1 - WINDOW - 60)
        + series("half", t1 - WINDOW - 60, step=2 * SCRAPE)  # every other scrape missing
    )
    h.prometheus_url = prometheus_factory(samples).url
    before = {app: p["metadata"]["resourceVersion"] for app, p in pods.items()}

    for now in (t1, t1 + GRACE + 10):
        run = h.run(now, concerns=("idle",))
        assert run.summary.errors == 0
        assert run.verdicts() == {"busy": 1, "not-reclaimable": 1, "exempt": 1, "no-evidence": 2}
        reasons = {
            line["pod"].split("/")[1].split("-")[0]: line["reason"]
            for line in run.mine("idle.no-evidence")
        }
        assert "no DCGM series" in reasons["dark"]
        assert "partial metrics" in reasons["half"]

    after = {
        app: h.pod(p["metadata"]["name"])["metadata"]["resourceVersion"] for app, p in pods.items()
    }
    assert after == before
    assert h.get("batch/v1", "jobs", "busy")["spec"].get("suspend") is not True
    for name in ("serve", "pinned", "dark", "half"):
        assert h.get("apps/v1", "deployments", name)["spec"]["replicas"] == 1
    assert [e for e in h.events() if e["source"].get("component") == "fleetplane-controller"] == []


def test_a_warning_is_cleared_when_the_gpu_gets_busy_again(
    harness: Harness, prometheus_factory: Any
) -> None:
    h = harness
    h.create(deployment("nb", "notebook"))
    (pod,) = h.wait_running("app=nb")
    name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]
    t1 = started_at(pod) + WINDOW + 30
    wakes = t1 + 60
    samples = dcgm(
        name,
        h.namespace,
        node,
        t1 - WINDOW - 60,
        t1 + GRACE + 60,
        util=lambda t: 0.0 if t < wakes else 70.0,
    )
    h.prometheus_url = prometheus_factory(samples).url

    h.run(t1, concerns=("idle",))
    assert WARNED in annotations_of(h.pod(name))
    run = h.run(t1 + GRACE + 10, concerns=("idle",))
    assert run.actions("idle.clear") == 1
    found = annotations_of(h.pod(name))
    assert WARNED not in found and DEADLINE not in found
    assert "IdleWarningCleared" in h.reasons(name)
    assert h.get("apps/v1", "deployments", "nb")["spec"]["replicas"] == 1
