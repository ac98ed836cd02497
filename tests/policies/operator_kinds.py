"""The operators' kinds for the policy cases (issue 30 item 3) and the objects of issue 33's
classes 3 and 5: a `Workload`'s pod template carried by a JobSet, a LeaderWorkerSet, a
RayCluster, a RayJob, a TrainJob, a TrainingRuntime or a Volcano CronJob, or a Pod that names
an owner. Each function returns a `Workload` whose `kind` the builders render through
`operator_object`.

    jobset(training(), jobs=2)                         # 2 Jobs of the training template
    raycluster(training(), max_replicas=3)             # a head and one autoscaled group
    trainjob(training(), nodes=2, labels=EXEMPT)       # Trainer would copy the label
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from tests.policies.builders import OPERATOR_GVK, Json, Workload, cpu

EXEMPT = {"fleetplane.dev/exempt": "true"}


def jobset(
    w: Workload,
    jobs: int = 1,
    parallelism: int = 1,
    job_labels: Json | None = None,
    **failure_policy: Any,
) -> Workload:
    """`job_labels`: the Job template's own labels (JobSet copies them onto each child Job)."""
    return replace(
        w,
        kind="JobSet",
        workload={
            "jobs": jobs,
            "parallelism": parallelism,
            "failurePolicy": failure_policy,
            "job_labels": job_labels,
        },
    )


def leaderworkerset(w: Workload, groups: int = 1, size: int = 2, max_surge: Any = None) -> Workload:
    return replace(
        w, kind="LeaderWorkerSet", workload={"groups": groups, "size": size, "surge": max_surge}
    )


def raycluster(
    w: Workload, max_replicas: int | None = 2, hosts: int = 1, labels: Json | None = None
) -> Workload:
    """`labels`: the RayCluster's own (KubeRay reads its PodGroup's queue and priority there)."""
    return replace(
        w, kind="RayCluster", workload={"max": max_replicas, "hosts": hosts, "labels": labels}
    )


def rayjob(w: Workload, max_replicas: int = 2, backoff_limit: int = 0) -> Workload:
    return replace(w, kind="RayJob", workload={"max": max_replicas, "retries": backoff_limit})


def trainjob(w: Workload, nodes: int | None = 2, **spec: Any) -> Workload:
    return replace(w, kind="TrainJob", workload={"nodes": nodes, "spec": spec})


def training_runtime(w: Workload) -> Workload:
    return replace(w, kind="TrainingRuntime")


def volcano_cronjob(w: Workload) -> Workload:
    return replace(w, kind="VolcanoCronJob")


def disruption_budget(**spec: Any) -> Workload:
    """A PodDisruptionBudget with this spec (it carries no pod template: the template is a
    placeholder the object leaves out)."""
    return replace(cpu(), kind="PodDisruptionBudget", workload=spec)


def owned_pod(w: Workload, owner: Json) -> Workload:
    return replace(w, kind="OwnedPod", workload={"owner": owner})


def _head(template: Json) -> Json:
    """A Ray head of the template's type and priority, without accelerators."""
    head = copy.deepcopy(template)
    for key in ("nodeSelector", "affinity", "tolerations"):
        head["spec"].pop(key, None)
    head["spec"]["containers"][0]["resources"] = {}
    head.get("metadata", {}).get("annotations", {}).pop("scheduling.volcano.sh/queue-name", None)
    return head


def _ray_cluster_spec(template: Json, max_replicas: int | None, hosts: int) -> Json:
    group: Json = {
        "groupName": "gpu",
        "replicas": 1,
        "minReplicas": 0,
        "numOfHosts": hosts,
        "template": template,
    }
    if max_replicas is not None:
        group["maxReplicas"] = max_replicas
    return {
        "enableInTreeAutoscaling": True,
        "headGroupSpec": {"template": _head(template)},
        "workerGroupSpecs": [group],
    }


def operator_object(w: Workload, template: Json, meta: Json) -> Json:
    """The object of an operator kind carrying `template` (already queued)."""
    group, version, kind, _ = OPERATOR_GVK[w.kind]
    api_version = f"{group}/{version}" if group else version
    head = {"apiVersion": api_version, "kind": kind, "metadata": meta}
    spec = w.workload
    if w.kind == "PodDisruptionBudget":
        return {**head, "spec": spec}
    if w.kind == "OwnedPod":
        metadata = {**template.get("metadata", {}), **meta, "ownerReferences": [spec["owner"]]}
        return {**head, "metadata": metadata, "spec": template["spec"]}
    if w.kind == "JobSet":
        job = {
            "parallelism": spec["parallelism"],
            "completions": spec["parallelism"],
            "backoffLimit": 0,
            "template": {**template, "spec": {**template["spec"], "restartPolicy": "Never"}},
        }
        job_template: Json = {"spec": job}
        if spec.get("job_labels"):
            job_template["metadata"] = {"labels": spec["job_labels"]}
        body: Json = {
            "replicatedJobs": [{"name": "w", "replicas": spec["jobs"], "template": job_template}]
        }
        if spec["failurePolicy"]:
            body["failurePolicy"] = spec["failurePolicy"]
        return {**head, "spec": body}
    if w.kind == "LeaderWorkerSet":
        body = {
            "replicas": spec["groups"],
            "leaderWorkerTemplate": {"size": spec["size"], "workerTemplate": template},
        }
        if spec["surge"] is not None:
            body["rolloutStrategy"] = {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {"maxSurge": spec["surge"]},
            }
        return {**head, "spec": body}
    if w.kind == "RayCluster":
        if spec["labels"]:
            head = {**head, "metadata": {**meta, "labels": spec["labels"]}}
        return {**head, "spec": _ray_cluster_spec(template, spec["max"], spec["hosts"])}
    if w.kind == "RayJob":
        body = {
            "entrypoint": "python train.py",
            "backoffLimit": spec["retries"],
            "activeDeadlineSeconds": 3600,
            "rayClusterSpec": _ray_cluster_spec(template, spec["max"], 1),
        }
        return {**head, "spec": body}
    if w.kind == "TrainJob":
        metadata = template.get("metadata", {})
        pod_spec = template["spec"]
        container = pod_spec["containers"][0]
        trainer: Json = {
            "image": container["image"],
            "resourcesPerNode": container.get("resources", {}),
        }
        if spec["nodes"] is not None:
            trainer["numNodes"] = spec["nodes"]
        placement = {
            k: pod_spec[k]
            for k in ("nodeSelector", "priorityClassName", "tolerations")
            if k in pod_spec
        }
        body = {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": trainer,
            "podTemplateOverrides": [{"targetJobs": [{"name": "node"}], "spec": placement}],
            **spec["spec"],
        }
        return {**head, "metadata": {**meta, **metadata}, "spec": body}
    if w.kind == "TrainingRuntime":
        job = {"template": {"spec": {"template": template}}}
        body = {"template": {"spec": {"replicatedJobs": [{"name": "node", **job}]}}}
        return {**head, "spec": body}
    # Volcano's CronJob: a Volcano Job template on a schedule.
    task = {"name": "worker", "replicas": 1, "template": template}
    job_spec = {"schedulerName": "volcano", "queue": "research", "tasks": [task]}
    return {**head, "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": job_spec}}}
