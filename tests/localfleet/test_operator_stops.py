"""The controller stops the operators' workloads through their own APIs, with the real
operators, Volcano, kube-scheduler and OPA running (issue 30 item 4): an idle TrainJob is
suspended (and with it the JobSet the Trainer made), an idle RayJob is suspended (KubeRay
deletes its cluster), an idle LeaderWorkerSet is scaled to zero; each workload's pods end and it
stays stopped. The reclaim is the controller's own path (`act.idle.reclaim`): the decision
asked of the project's reclaim policy for every pod, the write, the Events. Only the DCGM
evidence is given (there are no GPUs here): idle for the window, warned past the grace."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from controller.act.events import EventRecorder
from controller.act.idle import reclaim
from controller.act.opa import Opa
from controller.act.runtime import Runtime
from controller.config import Settings, parse_config
from controller.decide.idle import IdleFacts, PodJudgement, ReclaimPlan, Verdict
from controller.decide.workloads import reclaim_target
from controller.observe.kube import KubeClient
from controller.observe.model import pod_from_api
from controller.summary import Summary
from fleet import labels as keys
from localfleet.controlplane import LocalCluster
from localfleet.operators import LocalOperators
from localfleet.servers import OpaServer
from tests.controller.conftest import GRACE, WINDOW, config_for
from tests.localfleet.test_operators import (  # noqa: F401 (the fixture)
    NS,
    QUEUE,
    delete,
    operators,
    placed,
    ray_pod,
    trainjob,
)
from tests.localfleet.test_volcano import name, pod_spec, wait_for

pytestmark = pytest.mark.integration

TRAINING = {keys.WORKLOAD_TYPE: "training"}


@dataclass
class Stops:
    rt: Runtime
    cluster: LocalCluster


@pytest.fixture
def stops(
    operators: LocalOperators,  # noqa: F811
    opa_server: OpaServer,
) -> Iterator[Stops]:
    """The controller's act runtime on the operators' control plane, asking the real OPA with
    the project's policies and a configuration whose team owns the operators' namespace."""
    document = config_for(NS)
    opa_server.put_data("fleetplane/config", document)
    kube = KubeClient.from_kubeconfig(str(operators.cluster.kubeconfig))
    opa = Opa(opa_server.url)
    try:
        rt = Runtime(
            kube=kube,
            opa=opa,
            fleet=parse_config(document),
            settings=Settings(prometheus_url="http://unused", opa_url=opa_server.url),
            now=time.time(),
            summary=Summary(),
            out=io.StringIO(),
            events=EventRecorder(kube, dry_run=False),
        )
        yield Stops(rt, operators.cluster)
    finally:
        opa.close()
        kube.close()


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
    assert reclaim(rt, plan) is True, rt.out
    return plan


def gone_and_stays(kube: LocalCluster, selector: str, seconds: float = 8.0) -> None:
    """The pods of `selector` end, and none comes back for `seconds`."""
    wait_for(
        f"the pods of {selector} gone",
        lambda: not kube.get_json("pods", "-n", NS, "-l", selector)["items"],
        120,
    )
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert not kube.get_json("pods", "-n", NS, "-l", selector)["items"], selector
        time.sleep(1)


def reasons_on(kube: LocalCluster, kind: str, obj: str) -> set[str]:
    events = kube.get_json("events", "-n", NS)["items"]
    return {
        e["reason"]
        for e in events
        if e["involvedObject"]["kind"] == kind and e["involvedObject"]["name"] == obj
    }


def test_an_idle_trainjob_is_suspended_whole_and_its_pods_end(stops: Stops) -> None:
    cluster = stops.cluster
    app = name("tj")
    job = trainjob(app)
    job["spec"]["podTemplateOverrides"][0]["metadata"]["labels"].update(TRAINING)
    cluster.apply([job])
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
    worker = ray_pod(1)
    worker["metadata"] = {"labels": TRAINING}
    head = ray_pod(0)
    head["metadata"] = {"labels": TRAINING}
    rayjob = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": app, "namespace": NS, "labels": {"volcano.sh/queue-name": NS}},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            # KubeRay suspends only a RayJob that deletes its cluster when done
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": {
                "headGroupSpec": {"rayStartParams": {}, "template": head},
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": 1,
                        "minReplicas": 1,
                        "maxReplicas": 1,
                        "rayStartParams": {},
                        "template": worker,
                    }
                ],
            },
        },
    }
    cluster.apply([rayjob])
    try:
        ray_cluster = wait_for(
            "the RayJob's RayCluster",
            lambda: (
                cluster.get_json("rayjob", app, "-n", NS).get("status", {}).get("rayClusterName")
            ),
        )
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
    spec = pod_spec(1)
    spec["containers"][0]["resources"]["requests"] = {"nvidia.com/gpu": "1"}
    template = {
        "metadata": {"labels": {"app": app, **TRAINING}, "annotations": QUEUE},
        "spec": spec,
    }
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": app, "namespace": NS, "annotations": QUEUE},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": 2,
                "leaderTemplate": template,
                "workerTemplate": template,
            },
        },
    }
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
