"""The controller stops the operators' workloads through their own APIs, with the real
operators, Volcano, kube-scheduler and OPA running (issue 30 item 4): an idle TrainJob is
suspended (and with it the JobSet the Trainer made), an idle RayJob is suspended (KubeRay
deletes its cluster), an idle LeaderWorkerSet is scaled to zero; each workload's pods end and it
stays stopped. The reclaim is the controller's own path (`act.idle.reclaim`): the decision
asked of the project's reclaim policy for every pod, the write, the Events. Only the DCGM
evidence is given (there are no GPUs here): idle for the window, warned past the grace."""

from __future__ import annotations

import time
from typing import Any

import pytest

from controller.act.idle import reclaim
from controller.act.runtime import Runtime
from controller.decide.idle import IdleFacts, PodJudgement, ReclaimPlan, Verdict
from controller.decide.workloads import reclaim_target
from controller.observe.model import pod_from_api
from tests.controller.act_kit import printed
from tests.controller.conftest import GRACE, WINDOW
from tests.localfleet.operator_kit import (
    NS,
    TRAINING,
    Stops,
    delete,
    gone_and_stays,
    leaderworkerset,
    placed,
    ray_cluster_spec,
    ray_workload,
    rayjob_cluster,
    rayjob_spec,
    reasons_on,
    trainjob,
)
from tests.localfleet.test_volcano import name, wait_for

pytestmark = pytest.mark.integration


def reclaim_idle(rt: Runtime, pods: list[dict[str, Any]]) -> ReclaimPlan:
    """Reclaim the workload of `pods` as a pass that found them idle past the grace would."""
    now = time.time()
    rt.now = now
    facts = IdleFacts(
        window_seconds=WINDOW,
        gpus=1,
        samples=WINDOW // 15,
        expected_samples=WINDOW // 15,
        max_util_percent=0.0,
        max_engine_active=None,
        max_fb_used_mib=512.0,
        fb_swing_mib=0.0,
    )
    judgements = tuple(
        PodJudgement(
            pod=pod_from_api(pod),
            verdict=Verdict.RECLAIM,
            reason="GPU idle for 10m",
            facts=facts,
            warned_at=now - GRACE - 10,
        )
        for pod in pods
    )
    # the whole workload is one target, as the plans group pods (by the target's key)
    targets = {reclaim_target(j.pod).key for j in judgements}
    assert len(targets) == 1, targets
    plan = ReclaimPlan(target=reclaim_target(judgements[0].pod), pods=judgements)
    assert reclaim(rt, plan) is True, printed(rt)
    return plan


def test_an_idle_trainjob_is_suspended_whole_and_its_pods_end(stops: Stops) -> None:
    cluster = stops.cluster
    app = name("tj")
    cluster.apply([trainjob(app, labels=TRAINING)])
    try:
        pods = placed(cluster, f"jobset.sigs.k8s.io/jobset-name={app}", 2)
        plan = reclaim_idle(stops.rt, pods)
        assert (plan.target.kind, plan.target.name) == ("JobSet", app)
        got = cluster.get_json("trainjob", app, "-n", NS)
        assert got["spec"]["suspend"] is True
        assert got["metadata"]["annotations"]["fleetplane.dev/reclaim-reason"].startswith(
            "idle GPUs reclaimed"
        )
        # the Trainer carries the TrainJob's suspend onto its JobSet, whose Jobs end their pods
        wait_for(
            "the JobSet suspended",
            lambda: cluster.get_json("jobset", app, "-n", NS)["spec"].get("suspend") is True,
        )
        gone_and_stays(cluster, f"jobset.sigs.k8s.io/jobset-name={app}")
        assert cluster.get_json("trainjob", app, "-n", NS)["spec"]["suspend"] is True
        assert "IdleReclaimed" in reasons_on(cluster, "TrainJob", app)
    finally:
        delete(cluster, "trainjob", app)


def test_an_idle_rayjob_is_suspended_and_its_cluster_ends(stops: Stops) -> None:
    cluster = stops.cluster
    app = name("rj")
    # KubeRay suspends only a RayJob that deletes its cluster when done
    spec = rayjob_spec(
        ray_cluster_spec(workers=1, worker_gpus=1, labels=TRAINING), shutdownAfterJobFinishes=True
    )
    rayjob = ray_workload("RayJob", app, spec)
    cluster.apply([rayjob])
    try:
        ray_cluster = rayjob_cluster(cluster, app)
        selector = f"ray.io/cluster={ray_cluster},ray.io/node-type in (head,worker)"
        # Only the worker holds a GPU: the controller's snapshot keeps accelerator pods only
        pods = [
            p
            for p in placed(cluster, selector, 2)
            if p["metadata"]["labels"]["ray.io/node-type"] == "worker"
        ]
        plan = reclaim_idle(stops.rt, pods)
        assert (plan.target.kind, plan.target.name) == ("RayCluster", ray_cluster)
        assert cluster.get_json("rayjob", app, "-n", NS)["spec"]["suspend"] is True
        wait_for(
            "the RayJob Suspended",
            lambda: (
                cluster.get_json("rayjob", app, "-n", NS)
                .get("status", {})
                .get("jobDeploymentStatus")
                == "Suspended"
            ),
            120,
        )
        gone_and_stays(cluster, f"ray.io/cluster={ray_cluster}")
        assert "IdleReclaimed" in reasons_on(cluster, "RayJob", app)
    finally:
        delete(cluster, "rayjob", app)


def test_an_idle_leaderworkerset_is_scaled_to_zero(stops: Stops) -> None:
    cluster = stops.cluster
    app = name("lws")
    lws = leaderworkerset(app, 2, labels=TRAINING)
    cluster.apply([lws])
    try:
        pods = placed(cluster, f"app={app}", 2)
        plan = reclaim_idle(stops.rt, pods)
        assert (plan.target.kind, plan.target.name) == ("LeaderWorkerSet", app)
        got = cluster.get_json("leaderworkerset", app, "-n", NS)
        assert got["spec"]["replicas"] == 0
        assert got["metadata"]["annotations"]["fleetplane.dev/reclaimed-replicas"] == "1"
        gone_and_stays(cluster, f"app={app}")
        assert cluster.get_json("leaderworkerset", app, "-n", NS)["spec"]["replicas"] == 0
    finally:
        delete(cluster, "leaderworkerset", app)
