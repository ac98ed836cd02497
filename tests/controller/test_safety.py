"""Dry-run, the Lease, and faults: Prometheus down, OPA down, a write conflict, a run killed
half way. The invariant throughout: nothing is reclaimed without complete evidence and an
explicit allow, and the next pass completes the work."""

from __future__ import annotations

from typing import Any

import pytest

from controller.errors import InjectedFault
from controller.observe.kube import object_path
from controller.observe.model import format_time
from controller.reconcile import Hooks
from tests.controller.conftest import (
    GRACE,
    WINDOW,
    Harness,
    annotations_of,
    closed_url,
    dcgm,
    deployment,
    started_at,
)

pytestmark = pytest.mark.integration

WARNED = "fleetplane.dev/idle-warned-at"


def idle_notebooks(
    h: Harness, prometheus_factory: Any, *names: str
) -> tuple[float, dict[str, dict[str, Any]]]:
    """Idle notebook Deployments with complete DCGM evidence; returns the first pass time
    (one window after the last start) and the pods by Deployment name."""
    for name in names:
        h.create(deployment(name, "notebook"))
    pods = {
        p["metadata"]["labels"]["app"]: p
        for p in h.wait_running("fleetplane.dev/workload-type", count=len(names))
    }
    t1 = max(started_at(p) for p in pods.values()) + WINDOW + 30
    samples = []
    for pod in pods.values():
        samples += dcgm(
            pod["metadata"]["name"],
            h.namespace,
            pod["spec"]["nodeName"],
            t1 - WINDOW - 60,
            t1 + 2 * GRACE,
        )
    h.prometheus_url = prometheus_factory(samples).url
    return t1, pods


def versions(h: Harness, pods: dict[str, dict[str, Any]]) -> dict[str, str]:
    found = {
        f"pod/{app}": h.pod(p["metadata"]["name"])["metadata"]["resourceVersion"]
        for app, p in pods.items()
    }
    for app in pods:
        found[f"deployment/{app}"] = h.get("apps/v1", "deployments", app)["metadata"][
            "resourceVersion"
        ]
    found["namespace"] = h.client.get(f"/api/v1/namespaces/{h.namespace}")["metadata"][
        "resourceVersion"
    ]
    found["events"] = str(len(h.events()))
    return found


def test_dry_run_prints_every_action_and_changes_nothing(
    harness: Harness, prometheus_factory: Any
) -> None:
    h = harness
    t1, pods = idle_notebooks(h, prometheus_factory, "nb")
    before = versions(h, pods)
    run = h.run(t1, dry_run=True)
    assert "DRY-RUN idle: would warn" in run.out
    assert "DRY-RUN spend: would publish data.fleetplane.spend" in run.out
    assert versions(h, pods) == before
    assert h.opa.query("fleetplane/spend") == {}
    assert h.client.list(object_path("coordination.k8s.io/v1", "leases", h.namespace, None)) == []

    h.run(t1, concerns=("idle",))  # now really warn
    before = versions(h, pods)
    run = h.run(t1 + GRACE + 10, dry_run=True)
    assert "DRY-RUN idle: would reclaim (scale-to-zero) Deployment" in run.out
    assert versions(h, pods) == before
    assert h.get("apps/v1", "deployments", "nb")["spec"]["replicas"] == 1


def test_prometheus_down_means_no_evidence_and_no_action(
    harness: Harness, prometheus_factory: Any
) -> None:
    h = harness
    t1, pods = idle_notebooks(h, prometheus_factory, "nb")
    run = h.run(t1, concerns=("idle",), prometheus_url=closed_url())
    assert run.summary.get("errors", concern="idle", kind="temporary") == 1
    assert any(line["event"] == "idle.metrics-unavailable" for line in run.logs)
    assert WARNED not in annotations_of(h.pod(pods["nb"]["metadata"]["name"]))


def test_opa_down_means_no_reclaim_until_it_answers(
    harness: Harness, prometheus_factory: Any
) -> None:
    h = harness
    t1, _ = idle_notebooks(h, prometheus_factory, "nb")
    h.run(t1, concerns=("idle",))
    run = h.run(t1 + GRACE + 10, concerns=("idle",), opa_url=closed_url())
    assert run.summary.get("errors", concern="idle", kind="temporary") == 1
    assert h.get("apps/v1", "deployments", "nb")["spec"]["replicas"] == 1
    run = h.run(t1 + GRACE + 20, concerns=("idle",))
    assert run.actions("idle.reclaim") == 1
    assert h.get("apps/v1", "deployments", "nb")["spec"]["replicas"] == 0


def test_a_write_conflict_is_re_read_and_retried_once(
    harness: Harness, prometheus_factory: Any
) -> None:
    h = harness
    t1, pods = idle_notebooks(h, prometheus_factory, "nb")
    name = pods["nb"]["metadata"]["name"]

    def someone_else_writes(_snapshot: Any) -> None:
        # After the snapshot, before the controller writes: its resourceVersion is now stale.
        h.client.merge_patch(
            f"/api/v1/namespaces/{h.namespace}/pods/{name}",
            {"metadata": {"labels": {"touched": "yes"}}},
        )

    run = h.run(t1, concerns=("idle",), hooks=Hooks(after_observe=someone_else_writes))
    assert run.summary.errors == 0
    found = h.pod(name)
    assert found["metadata"]["labels"]["touched"] == "yes"
    assert annotations_of(found)[WARNED] == str(int(t1))


def test_a_run_killed_half_way_is_completed_by_the_next(
    harness: Harness, prometheus_factory: Any
) -> None:
    h = harness
    t1, pods = idle_notebooks(h, prometheus_factory, "a", "b")

    def kill_after_first(action: str) -> None:
        raise InjectedFault(f"killed after {action}")

    with pytest.raises(InjectedFault):
        h.run(t1, concerns=("idle",), hooks=Hooks(after_action=kill_after_first), act_concurrency=1)
    warned = {
        app: WARNED in annotations_of(h.pod(p["metadata"]["name"])) for app, p in pods.items()
    }
    assert sorted(warned.values()) == [False, True]

    run = h.run(t1 + 30, concerns=("idle",))
    assert run.actions("idle.warn") == 1  # only the one the killed run did not reach
    first = next(app for app, done in warned.items() if done)
    assert annotations_of(h.pod(pods[first]["metadata"]["name"]))[WARNED] == str(int(t1))

    with pytest.raises(InjectedFault):
        h.run(
            t1 + 30 + GRACE + 10,
            concerns=("idle",),
            hooks=Hooks(after_action=kill_after_first),
            act_concurrency=1,
        )
    replicas = sorted(h.get("apps/v1", "deployments", app)["spec"]["replicas"] for app in pods)
    assert replicas == [0, 1]
    run = h.run(t1 + 30 + GRACE + 20, concerns=("idle",))
    assert run.actions("idle.reclaim") == 1
    assert [h.get("apps/v1", "deployments", app)["spec"]["replicas"] for app in pods] == [0, 0]


def test_a_held_lease_stops_the_pass_and_an_expired_one_is_taken_over(
    harness: Harness, prometheus_factory: Any
) -> None:
    h = harness
    t1, pods = idle_notebooks(h, prometheus_factory, "nb")
    import time

    leases = object_path("coordination.k8s.io/v1", "leases", h.namespace, None)
    h.client.create(
        leases,
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "fleetplane-controller", "namespace": h.namespace},
            "spec": {
                "holderIdentity": "another-run",
                "leaseDurationSeconds": 300,
                "renewTime": format_time(time.time()).replace("Z", ".000000Z"),
            },
        },
    )
    run = h.run(t1, concerns=("idle",))
    assert run.summary.skipped and "another-run" in run.summary.skipped
    assert WARNED not in annotations_of(h.pod(pods["nb"]["metadata"]["name"]))

    h.client.merge_patch(
        f"{leases}/fleetplane-controller",
        {"spec": {"renewTime": format_time(time.time() - 600).replace("Z", ".000000Z")}},
    )
    run = h.run(t1, concerns=("idle",))
    assert run.summary.skipped is None
    assert run.actions("idle.warn") == 1
    lease = h.client.get(f"{leases}/fleetplane-controller")
    assert lease["spec"].get("holderIdentity") is None  # released at the end of the pass
    assert lease["spec"]["leaseTransitions"] == 1
