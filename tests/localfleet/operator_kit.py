"""The workload operators of the local fleet as the tests use them (test_operators and the
controller's tests against them: stops, preemption, lineage, the scenario's workloads): the real
operators as a module fixture, the controller's act runtime on their control plane, the
workloads they run in the team namespace, and waiting for their pods. The fixtures are
re-exported by conftest.py."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from controller.act.opa import Opa
from controller.act.runtime import Runtime
from controller.config import parse_config
from controller.observe.kube import KubeClient
from fleet import labels as keys
from localfleet.controlplane import LocalCluster
from localfleet.operators import OPERATORS, LocalOperators
from localfleet.servers import OpaServer
from tests.conftest import _LOG_SOURCES
from tests.controller.act_kit import act_runtime
from tests.controller.conftest import config_for
from tests.localfleet.test_volcano import TOLERATE_ALL, pod_spec, running, wait_for

NS = "vt-beta"
QUEUE = {"scheduling.volcano.sh/queue-name": "vt-beta"}
TRAINING = {keys.WORKLOAD_TYPE: "training"}


@pytest.fixture(scope="module")
def operators(kube: LocalCluster, volcano: Any) -> Iterator[LocalOperators]:
    runner = LocalOperators(cluster=kube, detached=False)
    runner.start()
    _LOG_SOURCES["operators"] = lambda: "\n".join(runner.log_tail(n) for n in OPERATORS)
    try:
        yield runner
    finally:
        _LOG_SOURCES.pop("operators", None)
        runner.stop()
        # The control plane is shared with the tests that follow: stopped operators' webhooks
        # (failurePolicy Fail) would refuse every later object of their kinds.
        for op in OPERATORS.values():
            for kind in ("Mutating", "Validating"):
                kube.kubectl(
                    "delete",
                    f"{kind.lower()}webhookconfiguration",
                    f"{op.name}-{kind.lower()}-webhook-configuration",
                    "--ignore-not-found",
                    check=False,
                )


@dataclass
class Stops:
    rt: Runtime
    cluster: LocalCluster


@pytest.fixture
def stops(operators: LocalOperators, opa_server: OpaServer) -> Iterator[Stops]:
    """The controller's act runtime on the operators' control plane, asking the real OPA with
    the project's policies and a configuration whose team owns the operators' namespace."""
    document = config_for(NS)
    opa_server.put_data("fleetplane/config", document)
    kube = KubeClient.from_kubeconfig(str(operators.cluster.kubeconfig))
    opa = Opa(opa_server.url)
    try:
        rt = act_runtime(kube, opa, parse_config(document), opa_url=opa_server.url, now=time.time())
        yield Stops(rt, operators.cluster)
    finally:
        opa.close()
        kube.close()


def items(kube: LocalCluster, kind: str, selector: str) -> list[dict[str, Any]]:
    return list(kube.get_json(kind, "-n", NS, "-l", selector)["items"])


def placed(kube: LocalCluster, selector: str, count: int) -> list[dict[str, Any]]:
    """Wait for `count` pods matching `selector` running on nodes; return them."""

    def found() -> list[dict[str, Any]] | None:
        pods = items(kube, "pods", selector)
        return pods if len(pods) == count and running(pods) else None

    pods: list[dict[str, Any]] = wait_for(f"{count} pods of {selector} running", found, 120)
    for pod in pods:
        assert pod["spec"]["schedulerName"] == "volcano", pod["metadata"]["name"]
        assert pod["spec"].get("nodeName"), pod["metadata"]["name"]
    return pods


def gone_and_stays(kube: LocalCluster, selector: str, seconds: float = 8.0) -> None:
    """The pods of `selector` end, and none comes back for `seconds`."""
    wait_for(f"the pods of {selector} gone", lambda: not items(kube, "pods", selector), 120)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert not items(kube, "pods", selector), selector
        time.sleep(1)


def reasons_on(kube: LocalCluster, kind: str, obj: str) -> set[str]:
    """The reasons of the Events on `kind` `obj`."""
    events = kube.get_json("events", "-n", NS)["items"]
    return {
        e["reason"]
        for e in events
        if e["involvedObject"]["kind"] == kind and e["involvedObject"]["name"] == obj
    }


def delete(kube: LocalCluster, kind: str, obj: str) -> None:
    kube.kubectl("delete", kind, obj, "-n", NS, "--wait=false", check=False)


def trainjob(
    app: str, runtime: str = "torch-distributed", labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A TrainJob of 2 nodes with 2 GPUs each on the release's `runtime`, its pods labelled
    `app` (and `labels`)."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": app, "namespace": NS, "annotations": QUEUE},
        "spec": {
            "runtimeRef": {"name": runtime},
            "trainer": {
                "numNodes": 2,
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": "2"}},
            },
            "podTemplateOverrides": [
                {
                    "targetJobs": [{"name": "node"}],
                    "spec": {"tolerations": TOLERATE_ALL},
                    "metadata": {"labels": {"app": app, **(labels or {})}, "annotations": QUEUE},
                }
            ],
        },
    }


def leaderworkerset(app: str, size: int, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One group of `size` pods (a leader and its workers) with a GPU each, labelled `app` (and
    `labels`), in the team's queue."""
    # LWS sums the templates' requests into the PodGroup's minResources (limits alone, which
    # the API server copies into a pod's requests, are not in the template): state both.
    spec = pod_spec(1)
    spec["containers"][0]["resources"]["requests"] = {"nvidia.com/gpu": "1"}
    template = {
        "metadata": {"labels": {"app": app, **(labels or {})}, "annotations": QUEUE},
        "spec": spec,
    }
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": app, "namespace": NS, "annotations": QUEUE},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": size,
                "leaderTemplate": template,
                "workerTemplate": template,
            },
        },
    }


def ray_pod(gpus: int, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "spec": {
            "containers": [
                {
                    "name": "ray",
                    "image": "rayproject/ray:2.46.0",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi"},
                        "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                    },
                }
            ],
            "tolerations": TOLERATE_ALL,
        }
    }
    if labels:
        pod["metadata"] = {"labels": dict(labels)}
    return pod


def ray_cluster_spec(
    workers: int, worker_gpus: int, labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A RayCluster's spec: a head without GPUs and one group of `workers` fixed workers."""
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": ray_pod(0, labels)},
        "workerGroupSpecs": [
            {
                "groupName": "gpu",
                "replicas": workers,
                "minReplicas": workers,
                "maxReplicas": workers,
                "rayStartParams": {},
                "template": ray_pod(worker_gpus, labels),
            }
        ],
    }


def ray_workload(kind: str, app: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A KubeRay object (RayCluster, RayJob) in the team namespace; KubeRay's Volcano
    integration takes the queue from its label."""
    return {
        "apiVersion": "ray.io/v1",
        "kind": kind,
        "metadata": {"name": app, "namespace": NS, "labels": {"volcano.sh/queue-name": NS}},
        "spec": spec,
    }


def rayjob_spec(cluster: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A RayJob's spec: a one-line entrypoint on a cluster of `cluster` (ray_cluster_spec)."""
    return {"entrypoint": "python -c 'print(1)'", **extra, "rayClusterSpec": cluster}


def rayjob_cluster(kube: LocalCluster, app: str) -> str:
    """Wait for the RayCluster KubeRay makes for RayJob `app`; its name."""
    cluster: str = wait_for(
        "the RayJob's RayCluster",
        lambda: kube.get_json("rayjob", app, "-n", NS).get("status", {}).get("rayClusterName"),
    )
    return cluster
