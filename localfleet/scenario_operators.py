"""The scenario's work of the operators' kinds (issue 30 item 7): a TrainJob gang and a RayJob, as
an ML team writes them, through the gate, the operators (localfleet.operators) and Volcano.

What the gate needs of them, beside what every workload carries (workload type, queue, allowed
image, GPU model by node selector):

- a priority class on every pod. A TrainJob cannot name one (Trainer v2.1.0's pod template
  overrides have no `priorityClassName`), so its pods take the runtime's: the platform offers
  a runtime of its own per workload type (`platform_runtime`), the release's
  `torch-distributed` with the Volcano PodGroup policy the local fleet installed and the type's
  priority class in the node template; teams name it in `runtimeRef`. A RayJob's pods name it
  in their templates, and KubeRay's Volcano PodGroup takes it from the `ray.io/priority-class-name`
  label;
- the whole workload's devices stated where the gate counts them: a TrainJob's `numNodes` and
  `resourcesPerNode`, a RayJob's worker groups with fixed replicas (min = max).

KubeRay suspends only a RayJob with `shutdownAfterJobFinishes: true` (the controller stops an
idle or overrunning RayJob by suspending it: controller/act/owners.py), so the scenario's has it.
"""

from __future__ import annotations

import copy
from typing import Any

from fleet import labels
from localfleet.controlplane import ClusterError, LocalCluster

RELEASE_RUNTIME = "torch-distributed"
"""The Trainer release's ClusterTrainingRuntime, as the local fleet installs it (with the
Volcano PodGroup policy: localfleet.operators.volcano_torch_runtime)."""
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
RAY_IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"
"""An image of an allowed registry (the local stack allows nvcr.io/); nothing runs it here."""


def platform_runtime_name(priority_class: str) -> str:
    """`<runtime>.<priority class>`: the gate reads a TrainJob's priority class from the name of
    its ClusterTrainingRuntime (policies/fleetplane/lib/workloads/trainjob.rego)."""
    return f"{RELEASE_RUNTIME}.{priority_class}"


def platform_runtime(release: dict[str, Any], priority_class: str) -> dict[str, Any]:
    """The release's runtime (as read from the cluster) under a name of its own, its node pods
    in `priority_class`."""
    runtime = copy.deepcopy(release)
    runtime["metadata"] = {
        "name": platform_runtime_name(priority_class),
        "labels": dict(release.get("metadata", {}).get("labels") or {}),
    }
    for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        pod_spec = job["template"]["spec"]["template"]["spec"]
        pod_spec["priorityClassName"] = priority_class
    return runtime


def install_platform_runtime(cluster: LocalCluster, priority_class: str) -> str:
    """Create (or update) the platform's runtime from the one the local fleet installed; its
    name."""
    release = cluster.get_json("clustertrainingruntime", RELEASE_RUNTIME)
    cluster.apply([platform_runtime(release, priority_class)])
    return platform_runtime_name(priority_class)


def checkpoints(namespace: str, name: str) -> dict[str, str]:
    """Where a training run checkpoints (the gate requires it of training on spot nodes)."""
    return {labels.CHECKPOINT_LOCATION: f"s3://{namespace}-checkpoints/{name}"}


def _owned_meta(name: str, namespace: str, scenario_labels: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": {**scenario_labels, "app": name}}


def train_job(
    name: str,
    namespace: str,
    queue: str,
    *,
    runtime: str,
    nodes: int,
    gpus: int,
    node_selector: dict[str, str],
    scenario_labels: dict[str, str],
    tolerations: list[dict[str, str]],
) -> dict[str, Any]:
    """A TrainJob gang of `nodes` nodes of `gpus` GPUs (one Volcano PodGroup of all of them)."""
    pod_labels = {**scenario_labels, "app": name, labels.WORKLOAD_TYPE: "training"}
    queue_annotation = {"scheduling.volcano.sh/queue-name": queue}
    pod_annotations = {**queue_annotation, **checkpoints(namespace, name)}
    meta = _owned_meta(name, namespace, scenario_labels)
    meta["labels"][labels.WORKLOAD_TYPE] = "training"
    meta["annotations"] = queue_annotation
    devices = {labels.GPU_RESOURCE: str(gpus)}
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": meta,
        "spec": {
            "runtimeRef": {"name": runtime},
            "trainer": {
                "image": RAY_IMAGE,
                "numNodes": nodes,
                "resourcesPerNode": {"requests": devices, "limits": devices},
            },
            "podTemplateOverrides": [
                {
                    "targetJobs": [{"name": "node"}],
                    "metadata": {"labels": pod_labels, "annotations": pod_annotations},
                    "spec": {
                        "nodeSelector": node_selector,
                        "tolerations": tolerations,
                    },
                }
            ],
        },
    }


def _ray_template(
    namespace: str,
    name: str,
    gpus: int,
    queue: str,
    priority_class: str,
    node_selector: dict[str, str],
    scenario_labels: dict[str, str],
    tolerations: list[dict[str, str]],
) -> dict[str, Any]:
    limits = {"cpu": "1", "memory": "1Gi"}
    spec: dict[str, Any] = {
        "priorityClassName": priority_class,
        "containers": [
            {
                "name": "ray",
                "image": RAY_IMAGE,
                "resources": {"requests": dict(limits), "limits": dict(limits)},
            }
        ],
    }
    if gpus:
        for part in ("requests", "limits"):
            spec["containers"][0]["resources"][part][labels.GPU_RESOURCE] = str(gpus)
        # only pods that request GPUs tolerate the GPU nodes' taint (the gate's
        # accelerator-access rule: the NVIDIA runtime could expose a node's devices)
        spec["nodeSelector"] = node_selector
        spec["tolerations"] = tolerations
    return {
        "metadata": {
            "labels": {**scenario_labels, "app": name, labels.WORKLOAD_TYPE: "training"},
            "annotations": {
                "scheduling.volcano.sh/queue-name": queue,
                **checkpoints(namespace, name),
            },
        },
        "spec": spec,
    }


def ray_job(
    name: str,
    namespace: str,
    queue: str,
    *,
    workers: int,
    gpus: int,
    priority_class: str,
    node_selector: dict[str, str],
    scenario_labels: dict[str, str],
    tolerations: list[dict[str, str]],
) -> dict[str, Any]:
    """A RayJob: a head and `workers` workers of `gpus` GPUs each, one Volcano gang. The job is
    submitted from a container KubeRay adds to the head pod (`submissionMode: SidecarMode`,
    KubeRay v1.5), so the submitter runs where the head does. In the default K8sJobMode the
    submitter is a pod of its own holding no accelerator: the local fleet has no node for it
    (every node is tainted for its accelerators, and the gate refuses a pod without
    accelerators that tolerates their taints), so it waited forever."""
    meta = _owned_meta(name, namespace, scenario_labels)
    meta["labels"].update(
        {
            labels.WORKLOAD_TYPE: "training",
            "volcano.sh/queue-name": queue,
            "ray.io/priority-class-name": priority_class,
        }
    )
    meta["annotations"] = {"scheduling.volcano.sh/queue-name": queue}
    args = (queue, priority_class, node_selector, scenario_labels, tolerations)
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": meta,
        "spec": {
            "entrypoint": "python -c 'import ray; ray.init()'",
            "shutdownAfterJobFinishes": True,
            # KubeRay refuses a submitterPodTemplate, a submitterConfig and a head restart
            # policy other than Never in this mode (utils.ValidateRayJobSpec); none is set.
            "submissionMode": "SidecarMode",
            "rayClusterSpec": {
                # The head holds a GPU too: the local fleet has no CPU nodes (every node is
                # tainted for its accelerators), and a pod without accelerators may not
                # tolerate their taints (the gate's accelerator-access rule).
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": _ray_template(namespace, name, gpus, *args),
                },
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": workers,
                        "minReplicas": workers,
                        "maxReplicas": workers,
                        "rayStartParams": {},
                        "template": _ray_template(namespace, name, gpus, *args),
                    }
                ],
            },
        },
    }


def submit_operator_work(
    cluster: LocalCluster,
    *,
    namespace: str,
    queue: str,
    node_selector: dict[str, str],
    priority_class: str,
    scenario_labels: dict[str, str],
    tolerations: list[dict[str, str]],
) -> list[tuple[str, str]]:
    """The scenario's TrainJob gang (2 nodes of 1 GPU) and RayJob (a head and a worker of 1
    GPU) in `namespace`; what the gate refused of them, as (what, message): the scenario goes on
    either way, and its account says so."""
    import json

    try:
        runtime = install_platform_runtime(cluster, priority_class)
    except ClusterError as error:  # the operators are not running: nothing of theirs to submit
        return [("UNEXPECTED: the platform's training runtime", str(error).strip()[-500:])]
    work = [
        train_job(
            "tj-finetune",
            namespace,
            queue,
            runtime=runtime,
            nodes=2,
            gpus=1,
            node_selector=node_selector,
            scenario_labels=scenario_labels,
            tolerations=tolerations,
        ),
        ray_job(
            "rj-eval",
            namespace,
            queue,
            workers=1,
            gpus=1,
            priority_class=priority_class,
            node_selector=node_selector,
            scenario_labels=scenario_labels,
            tolerations=tolerations,
        ),
    ]
    refused: list[tuple[str, str]] = []
    for obj in work:
        result = cluster.kubectl("apply", "-f", "-", input=json.dumps(obj), check=False)
        if result.returncode != 0:
            message = result.stderr.strip().split("denied the request:", 1)[-1].strip()
            refused.append((f"UNEXPECTED: the {obj['kind']} {obj['metadata']['name']}", message))
    return refused
