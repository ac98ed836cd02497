"""The workload operators as real parts of the local fleet (JobSet, LeaderWorkerSet, KubeRay,
Kubeflow Trainer at the pinned releases), with the real Volcano and kwok GPU nodes: each creates
what its workload needs, their webhooks answer the API server, and the kinds with a Volcano
integration gang through it (one PodGroup of the whole workload, in the team's queue)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from localfleet.controlplane import LocalCluster
from localfleet.operators import (
    OPERATORS,
    LocalOperators,
    ensure_operators,
    operator_identities,
    stop_operators,
)
from localfleet.processes import alive
from tests.localfleet.operator_kit import (
    NS,
    QUEUE,
    delete,
    items,
    leaderworkerset,
    placed,
    ray_cluster_spec,
    ray_workload,
    rayjob_spec,
    trainjob,
)
from tests.localfleet.test_volcano import name, pod_spec, wait_for

pytestmark = pytest.mark.integration


def owned_by(obj: dict[str, Any], kind: str, owner: str) -> bool:
    return any(
        ref["kind"] == kind and ref["name"] == owner
        for ref in obj["metadata"].get("ownerReferences", [])
    )


def podgroup(kube: LocalCluster, pod: dict[str, Any]) -> dict[str, Any]:
    group = pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
    return kube.get_json("podgroup", group, "-n", NS)


def test_each_operator_runs_as_its_own_identity(operators: LocalOperators) -> None:
    """Each process authenticates as its chart's ServiceAccount (the table the gate's trusted
    identities are configured from), and its webhooks are registered with the API server."""
    kube = operators.cluster
    for op in OPERATORS.values():
        who = kube.kubectl(
            f"--kubeconfig={operators.work_dir / op.name / 'kubeconfig'}", "auth", "whoami"
        )
        assert op.user in who.stdout, who.stdout
    users = {row["operator"]: row["user"] for row in operator_identities()}
    assert users == {
        "jobset": "system:serviceaccount:jobset-system:jobset-controller-manager",
        "lws": "system:serviceaccount:lws-system:lws-controller-manager",
        "kuberay": "system:serviceaccount:ray-system:kuberay-operator",
        "trainer": "system:serviceaccount:kubeflow-system:kubeflow-trainer-controller-manager",
    }
    registered = {
        hook["name"]
        for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
        for config in kube.get_json(kind)["items"]
        for hook in config["webhooks"]
    }
    assert {hook.name for op in OPERATORS.values() for hook in op.webhooks} <= registered


def test_a_jobset_creates_its_jobs_and_their_pods_are_scheduled(
    operators: LocalOperators,
) -> None:
    """JobSet v0.10 has no Volcano integration: its Jobs' pods go to Volcano (the team
    namespace's webhook), one PodGroup per Job, whose minMember Volcano takes from the Job's
    `scheduling.volcano.sh/group-min-member` (copied from the replicated job's template)."""
    kube = operators.cluster
    app = name("js")
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": app, "namespace": NS},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {
                        "metadata": {
                            "annotations": {"scheduling.volcano.sh/group-min-member": "2"}
                        },
                        "spec": {
                            "parallelism": 2,
                            "completions": 2,
                            "backoffLimit": 0,
                            "template": {
                                "metadata": {"labels": {"app": app}, "annotations": QUEUE},
                                "spec": {**pod_spec(1), "restartPolicy": "Never"},
                            },
                        },
                    },
                }
            ]
        },
    }
    kube.apply([jobset])
    try:
        created = kube.get_json("jobset", app, "-n", NS)
        # defaulted by JobSet's mutating webhook (its CRD has no such default)
        assert created["spec"]["successPolicy"]["operator"] == "All"
        pods = placed(kube, f"app={app}", 4)
        jobs = items(kube, "jobs", f"jobset.sigs.k8s.io/jobset-name={app}")
        assert len(jobs) == 2 and all(owned_by(job, "JobSet", app) for job in jobs)
        for pod in pods:
            # the pod webhook's label (pods are sent to it by the chart's objectSelector)
            assert pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == app
            group = podgroup(kube, pod)
            assert group["spec"]["minMember"] == 2
            assert group["spec"]["queue"] == "vt-beta"
        assert (
            len({p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] for p in pods}) == 2
        )
    finally:
        delete(kube, "jobset", app)


def test_a_leaderworkerset_creates_its_statefulsets_and_one_gang(
    operators: LocalOperators,
) -> None:
    """LWS's Volcano provider: one PodGroup per group (leader and workers), minMember the
    group's size, queue from the LeaderWorkerSet's annotation."""
    kube = operators.cluster
    app = name("lws")
    lws = leaderworkerset(app, 3)
    kube.apply([lws])
    try:
        pods = placed(kube, f"app={app}", 3)
        sets = items(kube, "statefulsets", f"leaderworkerset.sigs.k8s.io/name={app}")
        assert len(sets) == 2  # the leaders' and the group's workers'
        (group_name,) = {p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] for p in pods}
        group = kube.get_json("podgroup", group_name, "-n", NS)
        assert group["spec"]["minMember"] == 3
        assert group["spec"]["queue"] == "vt-beta"
        assert group["spec"]["minResources"].get("nvidia.com/gpu") == "3", group
    finally:
        delete(kube, "leaderworkerset", app)


def test_a_raycluster_creates_head_and_workers_in_one_volcano_gang(
    operators: LocalOperators,
) -> None:
    """KubeRay with `--batch-scheduler=volcano`: a PodGroup `ray-<name>-pg` of head and
    workers (minMember 1 + workers), queue from the `volcano.sh/queue-name` label."""
    kube = operators.cluster
    app = name("ray")
    cluster = ray_workload("RayCluster", app, ray_cluster_spec(workers=2, worker_gpus=1))
    kube.apply([cluster])
    try:
        pods = placed(kube, f"ray.io/cluster={app}", 3)
        assert sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in pods) == [
            "head",
            "worker",
            "worker",
        ]
        group = kube.get_json("podgroup", f"ray-{app}-pg", "-n", NS)
        assert owned_by(group, "RayCluster", app)
        assert group["spec"]["minMember"] == 3
        assert group["spec"]["queue"] == "vt-beta"
        assert all(podgroup(kube, p)["metadata"]["name"] == f"ray-{app}-pg" for p in pods)
    finally:
        delete(kube, "raycluster", app)


def test_a_rayjob_creates_its_raycluster_in_one_volcano_gang(operators: LocalOperators) -> None:
    """A RayJob's cluster is grouped under the RayJob's name (`ray-<rayjob>-pg`), its queue
    from the RayJob's label; the submitter pod is left out of minMember."""
    kube = operators.cluster
    app = name("rj")
    rayjob = ray_workload("RayJob", app, rayjob_spec(ray_cluster_spec(workers=1, worker_gpus=2)))
    kube.apply([rayjob])
    try:
        cluster = wait_for(
            "the RayJob's RayCluster",
            lambda: next(
                (
                    c["metadata"]["name"]
                    for c in kube.get_json("rayclusters", "-n", NS)["items"]
                    if owned_by(c, "RayJob", app)
                ),
                None,
            ),
        )
        pods = placed(kube, f"ray.io/cluster={cluster},ray.io/node-type in (head,worker)", 2)
        group = kube.get_json("podgroup", f"ray-{app}-pg", "-n", NS)
        assert owned_by(group, "RayJob", app)
        assert group["spec"]["minMember"] == 2
        assert group["spec"]["queue"] == "vt-beta"
        assert all(podgroup(kube, p)["metadata"]["name"] == f"ray-{app}-pg" for p in pods)
    finally:
        delete(kube, "rayjob", app)


def test_a_trainjob_creates_a_jobset_that_gangs_through_volcano(
    operators: LocalOperators,
) -> None:
    """The Trainer on the release's torch-distributed runtime with the Volcano PodGroup
    policy: a JobSet of its nodes, one PodGroup named after the TrainJob with all of them."""
    kube = operators.cluster
    app = name("tj")
    kube.apply([trainjob(app)])
    try:
        jobset = wait_for(
            "the TrainJob's JobSet",
            lambda: kube.kubectl(
                "get", "jobset", app, "-n", NS, "-o", "name", check=False
            ).stdout.strip(),
        )
        assert jobset
        assert owned_by(kube.get_json("jobset", app, "-n", NS), "TrainJob", app)
        group = kube.get_json("podgroup", app, "-n", NS)
        assert owned_by(group, "TrainJob", app)
        assert group["spec"]["minMember"] == 2
        assert group["spec"]["queue"] == "vt-beta"
        # Trainer v2.1.0 sums the runtime template's requests into minResources, not the
        # TrainJob's resourcesPerNode (docs/operators.md): the gate counts the TrainJob itself.
        pods = placed(kube, f"jobset.sigs.k8s.io/jobset-name={app}", 2)
        assert {p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] for p in pods} == {app}
    finally:
        delete(kube, "trainjob", app)


def test_the_trainer_webhook_refuses_a_trainjob_of_no_runtime(operators: LocalOperators) -> None:
    kube = operators.cluster
    refused = kube.kubectl(
        "create",
        "-f",
        "-",
        input=json.dumps(trainjob(name("tj"), "no-such")),
        check=False,
    )
    assert refused.returncode != 0
    assert "validator.trainjob.trainer.kubeflow.org" in refused.stderr, refused.stderr


def test_up_starts_the_operators_and_down_stops_them(operators: LocalOperators) -> None:
    """What `fleetplane up` and `down` run (last here: it stops the module's operators):
    `ensure_operators` starts them all, detached and serving (the Trainer's webhook answers),
    and leaves running ones alone; `stop_operators` finds them by their pid files and ends
    every one."""
    kube = operators.cluster
    attached = operators.running_pids()
    assert set(attached) == set(OPERATORS)
    operators.stop()
    assert not operators.running_pids()
    assert all(not alive(pid) for pid in attached.values())
    try:
        ensure_operators(kube, bin_dir=operators.bin_dir, log=lambda message: None)
        up = LocalOperators(cluster=kube).running_pids()
        assert set(up) == set(OPERATORS)
        ensure_operators(kube, bin_dir=operators.bin_dir, log=lambda message: None)
        assert LocalOperators(cluster=kube).running_pids() == up
        test_the_trainer_webhook_refuses_a_trainjob_of_no_runtime(operators)
    finally:
        stop_operators(kube)
    assert not LocalOperators(cluster=kube).running_pids()
    assert all(not alive(pid) for pid in up.values())
