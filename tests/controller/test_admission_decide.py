"""The pure decisions behind the documents the gate reads: workload records, reservations and
approval bindings (controller/decide/records.py, reservations.py, approvals.py)."""

from __future__ import annotations

import json
from typing import Any

from controller.config import FleetView, parse_config
from controller.decide.approvals import approval_users, plan_bindings
from controller.decide.lineage import by_uid
from controller.decide.records import workload_records
from controller.decide.reservations import plan_reservations, step_up
from controller.observe.model import Pod, pod_from_api
from controller.observe.workload_objects import WorkloadObject, workload_object_from_api
from policyreview.diff import CORPUS_DIR

NOW = 1_795_000_000.0
HOUR = 3600


def fleet() -> FleetView:
    config = json.loads((CORPUS_DIR / "config.json").read_text())
    config["namespaces"]["ml-research"] = "research"
    return parse_config(config)


def gpu_template(gpus: int, workload_type: str = "training", approval: str | None = None) -> Any:
    annotations = {"fleetplane.dev/approval-id": approval} if approval else {}
    return {
        "metadata": {
            "labels": {"fleetplane.dev/workload-type": workload_type},
            "annotations": annotations,
        },
        "spec": {
            "containers": [
                {"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
            ],
            "initContainers": [{"name": "warm", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
    }


def workload(
    kind: str,
    name: str,
    uid: str,
    template: Any,
    *,
    owner: Any = None,
    created: str = "2026-11-20T00:00:00Z",
    namespace: str = "ml-research",
) -> WorkloadObject:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid,
        "creationTimestamp": created,
    }
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "controller": True, **owner}]
    return workload_object_from_api(
        kind, {"metadata": metadata, "spec": {"replicas": 2, "template": template}}
    )


def pod(
    name: str,
    uid: str,
    owner: Any,
    *,
    gpus: int = 8,
    started: float | None = NOW - HOUR,
    phase: str = "Running",
    node: str | None = None,
    workload_type: str = "training",
    approval: str | None = None,
) -> Pod:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "ml-research",
        "uid": uid,
        "resourceVersion": "1",
        "creationTimestamp": "2026-11-20T00:00:00Z",
        "labels": {"fleetplane.dev/workload-type": workload_type},
        "annotations": {"fleetplane.dev/approval-id": approval} if approval else {},
    }
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "controller": True, **owner}]
    status: dict[str, Any] = {"phase": phase}
    if started is not None:
        status["startTime"] = __import__(
            "controller.observe.model", fromlist=["format_time"]
        ).format_time(started)
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]
    }
    if node:
        spec["nodeName"] = node
    return pod_from_api({"metadata": metadata, "spec": spec, "status": status})


def test_a_record_per_scalable_workload_as_the_gate_keys_and_counts_it() -> None:
    objects = [
        workload("StatefulSet", "trainer", "u-sts", gpu_template(4, approval="APR-1")),
        workload(
            "Deployment", "web", "u-dep", {"metadata": {}, "spec": {"containers": [{"name": "c"}]}}
        ),
        workload("Job", "once", "u-job", gpu_template(2)),  # no scale subresource: no record
        workload("StatefulSet", "sys", "u-sys", gpu_template(1), namespace="kube-system"),
    ]
    records = workload_records(objects, frozenset({"kube-system"}))
    assert records == {
        "ml-research": {
            # the init container's 1 GPU runs before the app's 4, not beside them
            "statefulsets.apps/trainer": {
                "uid": "u-sts",
                "kind": "StatefulSet",
                "workload_type": "training",
                "devices_per_replica": 4,
                "approval_id": "APR-1",
                "replicas": 2,
                "pod_labels": {"fleetplane.dev/workload-type": "training"},
            },
            "deployments.apps/web": {
                "uid": "u-dep",
                "kind": "Deployment",
                "workload_type": None,
                "devices_per_replica": 0,
                "approval_id": None,
                "replicas": 2,
                "pod_labels": {},
            },
        }
    }


def test_a_reservation_is_what_the_live_pods_will_still_cost_keyed_by_the_top_owner() -> None:
    view = fleet()
    deployment = workload("Deployment", "serve", "u-dep", gpu_template(8))
    replicaset = workload(
        "ReplicaSet",
        "serve-1",
        "u-rs",
        gpu_template(8),
        owner={"kind": "Deployment", "name": "serve", "uid": "u-dep"},
    )
    rs_owner = {"kind": "ReplicaSet", "name": "serve-1", "uid": "u-rs"}
    pods = [
        pod("a", "p-a", rs_owner),  # started an hour ago: 23 hours of 24 left
        pod("b", "p-b", rs_owner, started=None, phase="Pending"),  # all 24 hours ahead
        pod("c", "p-c", rs_owner, phase="Succeeded"),  # finished: nothing more to spend
        pod("d", "p-d", None, started=NOW - 25 * HOUR),  # past its type's bound: nothing left
    ]
    plan = plan_reservations(
        pods, {}, by_uid([deployment, replicaset]), view, NOW, horizon_seconds=600
    )
    dearest = max(
        p
        for m in view.models.values()
        if m.resource == "nvidia.com/gpu"
        for p in m.price_per_hour_usd.values()
    )
    (only,) = plan.reservations
    assert (only.team, only.key, only.uids, only.pods) == ("research", "u-dep", ("u-rs",), 2)
    # counted by the hour (STEP_SECONDS): from this hour's start to the end of the hour each
    # bound ends in (23 and 24 hours from now), so the document changes by the hour, not by
    # the pass
    as_of = NOW - NOW % HOUR
    left = [step_up(NOW + 23 * HOUR) - as_of, step_up(NOW + 24 * HOUR) - as_of]
    assert abs(only.usd - 8 * dearest * sum(left) / HOUR) < 1e-6
    assert 8 * dearest * (23 + 24) < only.usd <= 8 * dearest * (23 + 24 + 4)
    # expires when the last pod's bound ends (its hour): the gate counts it while now < it
    assert only.expires_at == int(step_up(NOW + 24 * HOUR)) >= NOW + 24 * HOUR
    entry = {"usd": round(only.usd, 2), "expires_at": only.expires_at, "uids": ["u-rs"]}
    assert plan.document() == {
        "research": {
            # by expiry for the gate, the entries for the object's own, and who owns u-rs
            "expiring": {str(only.expires_at): round(only.usd, 2)},
            "workloads": {"u-dep": entry},
            "owners": {"u-rs": "u-dep"},
        }
    }


def test_a_workload_without_a_runtime_bound_is_reserved_until_the_horizon() -> None:
    bounds = {n: w.default_max_runtime_seconds for n, w in fleet().workload_types.items()}
    assert bounds["training"] is not None
    config = json.loads((CORPUS_DIR / "config.json").read_text())
    config["namespaces"]["ml-research"] = "research"
    config["workload_types"]["training"]["default_max_runtime_seconds"] = None
    view = parse_config(config)
    plan = plan_reservations([pod("a", "p-a", None)], {}, {}, view, NOW, horizon_seconds=600)
    (only,) = plan.reservations
    assert only.key == "p-a" and only.uids == ()
    assert only.expires_at == int(step_up(NOW + 600)) >= NOW + 600  # the horizon's hour


def test_pods_of_no_team_reserve_nothing() -> None:
    view = fleet()
    stray = pod("a", "p-a", None)
    object.__setattr__(stray, "namespace", "nobody")
    assert plan_reservations([stray], {}, {}, view, NOW, horizon_seconds=600).reservations == []


APPROVALS = {
    "APR-1": {"team": "research", "max_accelerators": 64, "expires_at": NOW + 86400},
    "APR-X": {"team": "serving", "max_accelerators": 64, "expires_at": NOW + 86400},
    "APR-OLD": {"team": "research", "max_accelerators": 64, "expires_at": NOW - 1},
}


def test_an_approval_is_bound_to_the_first_workload_that_uses_it() -> None:
    view = fleet()
    first = workload(
        "StatefulSet",
        "first",
        "u-1",
        gpu_template(8, approval="APR-1"),
        created="2026-11-01T00:00:00Z",
    )
    second = workload(
        "StatefulSet",
        "second",
        "u-2",
        gpu_template(8, approval="APR-1"),
        created="2026-11-02T00:00:00Z",
    )
    objects = by_uid([second, first])
    users = approval_users(
        [pod("p", "p-1", {"kind": "StatefulSet", "name": "first", "uid": "u-1"}, approval="APR-1")],
        objects,
        view,
    )
    assert [u.uid for u in users] == ["u-1", "u-2"]  # earliest first, the pod is its StatefulSet's
    plan = plan_bindings(APPROVALS, {}, users, NOW)
    assert [(b.approval_id, b.uid) for b in plan.new] == [("APR-1", "u-1")]
    assert plan.document() == {"APR-1": {"uid": "u-1"}}
    assert [(u.uid, why) for u, why in plan.unusable] == [
        ("u-2", "approval bound to another workload (uid u-1)")
    ]


def test_a_binding_is_never_undone_and_a_kept_one_wins() -> None:
    view = fleet()
    user = approval_users(
        [],
        by_uid([workload("StatefulSet", "new", "u-new", gpu_template(8, approval="APR-1"))]),
        view,
    )
    # the workload it was bound to is gone; OPA (a restarted replica) shows it unbound
    plan = plan_bindings(APPROVALS, {"APR-1": "u-gone"}, user, NOW)
    assert plan.new == [] and plan.bound == {"APR-1": "u-gone"}
    bound_in_opa = {**APPROVALS, "APR-1": {**APPROVALS["APR-1"], "uid": "u-gone"}}
    assert plan_bindings(bound_in_opa, {}, user, NOW).bound == {"APR-1": "u-gone"}


def test_approvals_of_another_team_expired_or_unknown_are_not_bound() -> None:
    view = fleet()
    objects = by_uid(
        [
            workload("StatefulSet", "a", "u-a", gpu_template(8, approval="APR-X")),
            workload("StatefulSet", "b", "u-b", gpu_template(8, approval="APR-OLD")),
            workload("StatefulSet", "c", "u-c", gpu_template(8, approval="APR-NONE")),
        ]
    )
    plan = plan_bindings(APPROVALS, {}, approval_users([], objects, view), NOW)
    assert plan.new == [] and plan.bound == {}
    assert sorted(why for _, why in plan.unusable) == [
        "approval expired or without an expiry",
        "approval granted to team serving",
        "no such approval in OPA",
    ]
