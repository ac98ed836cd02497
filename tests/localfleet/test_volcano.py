"""The real Volcano on the local control plane: every accelerator workload of a team namespace
is placed by it in the team's queue, the queue is the team-wide limit, gangs are placed whole,
and nothing is evicted for a pending high-priority pod (the controller is the one preemptor)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from controller.observe.snapshot import _volcano
from localfleet.controlplane import LocalCluster

pytestmark = pytest.mark.integration

TOLERATE_ALL = [{"operator": "Exists"}]
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def container(gpus: int) -> dict[str, Any]:
    return {
        "name": "main",
        "image": "nvcr.io/nvidia/pytorch:25.01-py3",
        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
    }


def pod_spec(gpus: int, **extra: Any) -> dict[str, Any]:
    return {"containers": [container(gpus)], "tolerations": TOLERATE_ALL, **extra}


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def wait_for(what: str, check: Callable[[], Any], timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def pods(kube: LocalCluster, namespace: str, selector: str) -> list[dict[str, Any]]:
    return list(kube.get_json("pods", "-n", namespace, "-l", selector)["items"])


def running(items: list[dict[str, Any]]) -> bool:
    return bool(items) and all(p.get("status", {}).get("phase") == "Running" for p in items)


def podgroup_queue(kube: LocalCluster, pod: dict[str, Any]) -> str:
    group = pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
    pg = kube.get_json("podgroup", group, "-n", pod["metadata"]["namespace"])
    return str(pg["spec"].get("queue"))


def workloads(ns: str, app: str, gpus: int) -> list[dict[str, Any]]:
    """A plain Pod, a Deployment, a batch Job and a Volcano Job, none naming a scheduler."""
    # Templates name the team's queue: Volcano 1.15's PodGroup controller rebuilds a
    # controller-owned pod's PodGroup on pod updates and takes the queue only from the pod, so
    # the namespace's annotation alone lets it fall back to `default` (docs/contracts.md).
    # The plain Pod relies on the namespace annotation (/podgroups/mutate).
    queue = {"scheduling.volcano.sh/queue-name": ns.split("-")[0] + "-" + ns.split("-")[1]}
    template = {"metadata": {"labels": {"app": app}, "annotations": queue}, "spec": pod_spec(gpus)}
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{app}-pod", "namespace": ns, "labels": {"app": app}},
            "spec": pod_spec(gpus),
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": f"{app}-deploy", "namespace": ns},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": app}},
                "template": template,
            },
        },
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": f"{app}-job", "namespace": ns},
            "spec": {
                "template": {
                    "metadata": {"labels": {"app": app}, "annotations": queue},
                    "spec": {**pod_spec(gpus), "restartPolicy": "Never"},
                }
            },
        },
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": f"{app}-vcjob", "namespace": ns},
            "spec": {
                "minAvailable": 1,
                "queue": "vt-beta",
                "tasks": [
                    {
                        "name": "main",
                        "replicas": 1,
                        "template": {
                            "metadata": {"labels": {"app": app}},
                            "spec": {**pod_spec(gpus), "restartPolicy": "Never"},
                        },
                    }
                ],
            },
        },
    ]


def test_every_kind_of_workload_is_placed_by_volcano_in_the_team_queue(
    kube: LocalCluster, volcano: Any
) -> None:
    app = name("kinds")
    kube.apply(workloads("vt-beta", app, 1))

    def four_running() -> list[dict[str, Any]] | None:
        found = pods(kube, "vt-beta", f"app={app}")
        return found if len(found) == 4 and running(found) else None

    placed = wait_for("four pods running", four_running)
    for pod in placed:
        assert pod["spec"]["schedulerName"] == "volcano", pod["metadata"]["name"]
        assert podgroup_queue(kube, pod) == "vt-beta", pod["metadata"]["name"]
    kube.kubectl(
        "delete",
        "pod,deploy,job,vcjob",
        "-n",
        "vt-beta",
        "-l",
        f"app={app}",
        "--wait=false",
        check=False,
    )
    for kind, obj in (
        ("deploy", f"{app}-deploy"),
        ("job", f"{app}-job"),
        ("vcjob", f"{app}-vcjob"),
    ):
        kube.kubectl("delete", kind, obj, "-n", "vt-beta", "--wait=false", check=False)


def test_a_team_of_two_namespaces_never_exceeds_its_queue(kube: LocalCluster, volcano: Any) -> None:
    """vt-alpha's quota (8 GPUs) is its queue's capability, across both its namespaces: 6 GPUs
    in one namespace run, 4 in the other wait, and start once the first are gone."""
    app = name("quota")
    first = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{app}-a", "namespace": "vt-alpha-a", "labels": {"app": app}},
        "spec": pod_spec(6),
    }
    second = {
        **first,
        "metadata": {"name": f"{app}-b", "namespace": "vt-alpha-b", "labels": {"app": app}},
        "spec": pod_spec(4),
    }
    kube.apply([first])
    wait_for("the first pod running", lambda: running(pods(kube, "vt-alpha-a", f"app={app}")))
    kube.apply([second])
    time.sleep(8)  # several scheduling sessions
    (waiting,) = pods(kube, "vt-alpha-b", f"app={app}")
    assert waiting["status"]["phase"] == "Pending" and not waiting["spec"].get("nodeName")
    queue = kube.get_json("queue", "vt-alpha")
    assert queue["spec"]["capability"]["nvidia.com/gpu"] == "8"
    assert queue["status"]["allocated"]["nvidia.com/gpu"] == "6"
    kube.kubectl("delete", "pod", f"{app}-a", "-n", "vt-alpha-a", "--grace-period=0", "--force")
    wait_for("the second pod running", lambda: running(pods(kube, "vt-alpha-b", f"app={app}")))
    kube.kubectl(
        "delete", "pod", f"{app}-b", "-n", "vt-alpha-b", "--grace-period=0", "--force", check=False
    )


def test_a_gang_is_placed_whole_or_not_at_all(kube: LocalCluster, volcano: Any) -> None:
    """A Volcano Job of two 8-GPU pods with minAvailable 2 in vt-alpha (8 GPUs): Volcano places
    neither pod, never one of the two."""
    app = name("gang")
    job = workloads("vt-alpha-a", app, 8)[3]
    job["spec"].update(minAvailable=2, queue="vt-alpha")
    job["spec"]["tasks"][0]["replicas"] = 2
    kube.apply([job])
    wait_for("two pods created", lambda: len(pods(kube, "vt-alpha-a", f"app={app}")) == 2)
    time.sleep(8)
    created = pods(kube, "vt-alpha-a", f"app={app}")
    assert all(not p["spec"].get("nodeName") for p in created)
    # The controller finds a pending gang's size the way this does: the PodGroup the pods'
    # annotation names, and its minMember (controller.observe.snapshot, decide.preempt).
    (group,) = {p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] for p in created}
    podgroup = kube.get_json("podgroup", group, "-n", "vt-alpha-a")
    assert _volcano("PodGroup", podgroup).min_member == 2
    kube.kubectl("delete", "vcjob", f"{app}-vcjob", "-n", "vt-alpha-a", "--wait=false")


def test_no_eviction_for_a_pending_high_priority_pod(kube: LocalCluster, volcano: Any) -> None:
    """vt-alpha's queue is full with a low-priority batch pod; a high-priority training pod of
    the same team waits and neither Volcano nor kube-scheduler evicts anything: only the
    controller's pass, asking OPA, would choose victims."""
    app = name("prio")
    low = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{app}-low", "namespace": "vt-alpha-a", "labels": {"app": app}},
        "spec": pod_spec(8, priorityClassName="fleetplane-batch"),
    }
    high = {
        **low,
        "metadata": {"name": f"{app}-high", "namespace": "vt-alpha-b", "labels": {"app": app}},
        "spec": pod_spec(8, priorityClassName="fleetplane-training-high"),
    }
    kube.apply([low])
    wait_for(
        "the low-priority pod running", lambda: running(pods(kube, "vt-alpha-a", f"app={app}"))
    )
    kube.apply([high])
    time.sleep(12)
    (still,) = pods(kube, "vt-alpha-a", f"app={app}")
    assert still["status"]["phase"] == "Running" and not still["metadata"].get("deletionTimestamp")
    (waits,) = pods(kube, "vt-alpha-b", f"app={app}")
    assert not waits["spec"].get("nodeName")
    events = json.loads(kube.kubectl("get", "events", "-n", "vt-alpha-a", "-o", "json").stdout)[
        "items"
    ]
    assert not [e for e in events if e.get("reason") in ("Preempted", "Evict", "Evicted")]
    kube.kubectl(
        "delete",
        "pod",
        "-n",
        "vt-alpha-a",
        f"{app}-low",
        "--grace-period=0",
        "--force",
        check=False,
    )
    kube.kubectl(
        "delete",
        "pod",
        "-n",
        "vt-alpha-b",
        f"{app}-high",
        "--grace-period=0",
        "--force",
        check=False,
    )


def test_the_scheduler_killed_then_restarted_resumes_placement(
    kube: LocalCluster, volcano: Any
) -> None:
    """vc-scheduler crashes: a pod submitted meanwhile waits (nothing else places it, nothing
    is lost), and is placed once the scheduler is back."""
    app = name("crash")
    volcano.kill("vc-scheduler")
    try:
        kube.apply(
            [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": app, "namespace": "vt-beta", "labels": {"app": app}},
                    "spec": pod_spec(1),
                }
            ]
        )
        time.sleep(6)
        (waiting,) = pods(kube, "vt-beta", f"app={app}")
        assert waiting["spec"]["schedulerName"] == "volcano"
        assert not waiting["spec"].get("nodeName")
    finally:
        volcano.start_component("vc-scheduler")
    wait_for(
        "the pod placed after the restart", lambda: running(pods(kube, "vt-beta", f"app={app}"))
    )
    kube.kubectl("delete", "pod", app, "-n", "vt-beta", "--grace-period=0", "--force", check=False)
