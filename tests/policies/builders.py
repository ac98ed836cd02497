"""Fluent builders for the AdmissionReviews the policy tests send, and a reader for the answers.

Every builder method returns a new builder, so a test states its intent in one line:

    gate.review(notebook().gpus(2))                       # one Pod
    gate.review(training().as_job(parallelism=4))         # a Job of four such pods
    gate.review(inference().tolerate_spot().in_namespace("ml-serving"))

The starting points (`training()`, `inference()`, `notebook()`, `batch()`, `cpu()`) are valid
workloads of the fixture configuration (policyreview/corpus/config.json) in the research
team's namespace; each method changes one thing about the pod template or the object around it.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

WORKLOAD_TYPE = "fleetplane.dev/workload-type"
APPROVAL_ID = "fleetplane.dev/approval-id"
CHECKPOINT_LOCATION = "fleetplane.dev/checkpoint-location"
IDLE_TIMEOUT = "fleetplane.dev/idle-timeout-seconds"
GPU_PRODUCT = "nvidia.com/gpu.product"
TPU_ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"
CAPACITY_TYPE = "fleetplane.dev/capacity-type"

MODEL_LABELS = {
    "h100-80gb": (GPU_PRODUCT, "NVIDIA-H100-80GB-HBM3"),
    "a100-40gb": (GPU_PRODUCT, "NVIDIA-A100-SXM4-40GB"),
    "tpu-v5e": (TPU_ACCELERATOR, "tpu-v5-lite-podslice"),
}
SPOT_TOLERATION = {
    "key": CAPACITY_TYPE,
    "operator": "Equal",
    "value": "spot",
    "effect": "NoSchedule",
}
ALLOWED_IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"
# The Volcano queue of each team namespace of the fixture configuration.
TEAM_QUEUES = {"ml-research": "research", "ml-serving": "serving", "analytics": "analytics"}

Json = dict[str, Any]
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
ACCELERATOR_PREFIXES = (
    "nvidia.com/gpu",
    "nvidia.com/mig-",
    "google.com/tpu",
    "deviceclass.resource.kubernetes.io/gpu.nvidia.com",
)


def _requests_accelerators(template: Json) -> bool:
    for container in (template.get("spec") or {}).get("containers") or ():
        resources = container.get("resources") or {}
        for amounts in (resources.get("limits") or {}, resources.get("requests") or {}):
            if any(str(r).startswith(ACCELERATOR_PREFIXES) for r in amounts):
                return True
    return False


@dataclass(frozen=True)
class Workload:
    """A pod template plus the object that carries it (a Pod by default)."""

    template: Json
    namespace: str = "ml-research"
    kind: str = "Pod"
    workload: Json = field(default_factory=dict)
    tasks: tuple[tuple[str, int], ...] = ()
    operation: str = "CREATE"
    old_object: Json | None = None
    sub_resource: str | None = None
    name: str = "w"
    # A Volcano Job's spec.queue: by default its namespace's team's queue (the team's name in
    # the fixture configuration), as a well-configured submission names it; "" leaves it out.
    volcano_queue: str | None = None
    # The queue annotation of an accelerator template (scheduling.volcano.sh/queue-name): by
    # default its namespace's team's queue, as the gate requires of every accelerator pod of
    # a team namespace (Volcano Jobs aside); "" leaves it out, a name sets that one.
    pod_queue: str | None = None
    # A CronJob's spec.concurrencyPolicy (None leaves it out: Allow, which the gate refuses).
    concurrency_policy: str | None = None
    # Who sends the request (userInfo.username): a user unless told.
    username: str = "alice@example.com"

    # ------------------------------------------------------------ the pod template

    def _edit(self, change: Callable[[Json], None]) -> Workload:
        template = copy.deepcopy(self.template)
        change(template)
        return replace(self, template=template)

    def _spec(self, **fields: Any) -> Workload:
        return self._edit(lambda t: t["spec"].update(copy.deepcopy(fields)))

    def _main(self, change: Callable[[Json], None]) -> Workload:
        return self._edit(lambda t: change(t["spec"]["containers"][0]))

    def label(self, key: str, value: str | None) -> Workload:
        """Set (or with None remove) a pod template label."""
        return self._edit(lambda t: _set(t["metadata"].setdefault("labels", {}), key, value))

    def annotate(self, key: str, value: str | None) -> Workload:
        """Set (or with None remove) a pod template annotation."""
        return self._edit(lambda t: _set(t["metadata"].setdefault("annotations", {}), key, value))

    def typed(self, workload_type: str | None) -> Workload:
        return self.label(WORKLOAD_TYPE, workload_type)

    def limits(self, limits: Mapping[str, Any]) -> Workload:
        """Replace the main container's resources with these limits."""
        return self._main(lambda c: c.update(resources={"limits": dict(limits)}))

    def resources(self, resources: Mapping[str, Any]) -> Workload:
        """Replace the main container's resources (limits and requests) as given."""
        return self._main(lambda c: c.update(resources=copy.deepcopy(dict(resources))))

    def gpus(self, count: Any) -> Workload:
        return self.limits({"nvidia.com/gpu": count})

    def tpus(self, count: Any) -> Workload:
        return self.limits({"google.com/tpu": count}).model("tpu-v5e")

    def model(self, *models: str) -> Workload:
        """Select one model by nodeSelector, or several by required node affinity."""
        if len(models) == 1:
            key, value = MODEL_LABELS[models[0]]
            return self._edit(lambda t: _select(t, {key: value}))
        key = MODEL_LABELS[models[0]][0]
        values = [MODEL_LABELS[m][1] for m in models]
        return self.no_model()._spec(
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": key, "operator": "In", "values": values}]}
                        ]
                    }
                }
            }
        )

    def select(self, key: str, value: str) -> Workload:
        return self._edit(lambda t: _select(t, {key: value}))

    def no_model(self) -> Workload:
        def drop(t: Json) -> None:
            selector = t["spec"].get("nodeSelector", {})
            for key, _ in MODEL_LABELS.values():
                selector.pop(key, None)

        return self._edit(drop)

    def tolerate(self, **toleration: Any) -> Workload:
        """Add a toleration to the pod template."""
        return self._edit(lambda t: t["spec"].setdefault("tolerations", []).append(toleration))

    def probe_grace(self, probe: str, seconds: Any) -> Workload:
        """A probe of the main container with its own terminationGracePeriodSeconds."""
        value = {"exec": {"command": ["true"]}, "terminationGracePeriodSeconds": seconds}
        return self._main(lambda c: c.update({probe: value}))

    def placed(self, **spec: Any) -> Workload:
        """With these placement fields of the pod spec (affinity, topologySpreadConstraints)."""
        return self._spec(**spec)

    def tolerate_spot(self) -> Workload:
        return self._edit(lambda t: t["spec"].setdefault("tolerations", []).append(SPOT_TOLERATION))

    def on_spot(self) -> Workload:
        """Pin to spot capacity and tolerate its taint."""
        return self.select(CAPACITY_TYPE, "spot").tolerate_spot()

    def on_demand(self) -> Workload:
        def drop(t: Json) -> None:
            t["spec"].get("nodeSelector", {}).pop(CAPACITY_TYPE, None)
            t["spec"].pop("tolerations", None)

        return self._edit(drop)

    def priority(self, priority_class: str | None) -> Workload:
        if priority_class is None:
            return self._edit(lambda t: t["spec"].pop("priorityClassName", None))
        return self._spec(priorityClassName=priority_class)

    def deadline(self, seconds: Any) -> Workload:
        """activeDeadlineSeconds of the pod template."""
        return self._spec(activeDeadlineSeconds=seconds)

    def image(self, image: str) -> Workload:
        return self._main(lambda c: c.update(image=image))

    def init_container(self, image: str = ALLOWED_IMAGE, **extra: Any) -> Workload:
        container = {"name": "init", "image": image, **extra}
        return self._edit(lambda t: t["spec"].setdefault("initContainers", []).append(container))

    def sidecar(self, **extra: Any) -> Workload:
        """A sidecar: an init container that keeps running (restartPolicy Always)."""
        return self.init_container(name="sidecar", restartPolicy="Always", **extra)

    def ephemeral_container(self, image: str = ALLOWED_IMAGE, **extra: Any) -> Workload:
        container = {"name": "debug", "image": image, **extra}
        return self._edit(
            lambda t: t["spec"].setdefault("ephemeralContainers", []).append(container)
        )

    def env(self, name: str, value: str) -> Workload:
        """An environment variable of the main container."""
        variable = {"name": name, "value": value}
        return self._main(lambda c: c.setdefault("env", []).append(variable))

    def grace(self, seconds: Any) -> Workload:
        """terminationGracePeriodSeconds of the pod template."""
        return self._spec(terminationGracePeriodSeconds=seconds)

    def privileged(self) -> Workload:
        return self._main(lambda c: c.update(securityContext={"privileged": True}))

    def host(self, namespace_field: str) -> Workload:
        """hostNetwork, hostPID or hostIPC."""
        return self._spec(**{namespace_field: True})

    def host_path(self, path: str = "/var/run") -> Workload:
        volume = {"name": "host", "hostPath": {"path": path}}
        return self._edit(lambda t: t["spec"].setdefault("volumes", []).append(volume))

    def node_name(self, node: str) -> Workload:
        return self._spec(nodeName=node)

    def approved(self, approval_id: str = "APR-2026-001") -> Workload:
        return self.annotate(APPROVAL_ID, approval_id)

    def checkpoint(self, location: str | None = "s3://checkpoints/run-1") -> Workload:
        return self.annotate(CHECKPOINT_LOCATION, location)

    def idle_timeout(self, seconds: str | None) -> Workload:
        return self.annotate(IDLE_TIMEOUT, seconds)

    # ------------------------------------------------------------ the object around it

    def in_namespace(self, namespace: str) -> Workload:
        return replace(self, namespace=namespace)

    def as_deployment(self, replicas: Any = 1, strategy: dict[str, Any] | None = None) -> Workload:
        """A Deployment; `strategy` (e.g. {"type": "Recreate"}) rolls it out without the default
        surge, which the gate counts in what it holds."""
        spec = (
            {"replicas": replicas}
            if strategy is None
            else {"replicas": replicas, "strategy": strategy}
        )
        return replace(self, kind="Deployment", workload=spec)

    def as_statefulset(self, replicas: Any = 1) -> Workload:
        return replace(self, kind="StatefulSet", workload={"replicas": replicas})

    def as_job(self, **job_spec: Any) -> Workload:
        """A batch/v1 Job; job_spec: parallelism, completions, activeDeadlineSeconds..."""
        return replace(self, kind="Job", workload=job_spec)

    def as_cronjob(self, concurrency_policy: str | None = None, **job_spec: Any) -> Workload:
        """A CronJob of Jobs with `job_spec`; runs may overlap unless `concurrency_policy` is
        Forbid or Replace."""
        return replace(
            self, kind="CronJob", workload=job_spec, concurrency_policy=concurrency_policy
        )

    def by(self, username: str) -> Workload:
        """The request as `username` sends it (a service account: system:serviceaccount:...)."""
        return replace(self, username=username)

    def as_volcano_job(self, *tasks: tuple[str, int]) -> Workload:
        """A Volcano Job whose tasks (name, replicas) all use this template."""
        return replace(self, kind="VolcanoJob", tasks=tasks or (("worker", 1),))

    def queue(self, name: str) -> Workload:
        """A Volcano Job in queue `name` ("" for none, as Volcano's webhook then sets "default")."""
        return replace(self, volcano_queue=name)

    def updated_from(self, old: Workload) -> Workload:
        """An UPDATE of `old` to this object."""
        return replace(self, operation="UPDATE", old_object=old.object())

    def subresource(self, name: str) -> Workload:
        return replace(self, sub_resource=name)

    # ------------------------------------------------------------ rendering

    def object(self) -> Json:
        """The Kubernetes object under review."""
        meta = {"name": self.name, "namespace": self.namespace}
        template = self._queued(copy.deepcopy(self.template))
        if self.kind in OPERATOR_GVK:
            from tests.policies.operator_kinds import operator_object

            return operator_object(self, template, meta)
        if self.kind == "Pod":
            metadata = {**template.get("metadata", {}), **meta}
            return {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": metadata,
                "spec": template["spec"],
            }
        if self.kind in ("Deployment", "StatefulSet"):
            spec = {**self.workload, "selector": {"matchLabels": {"app": self.name}}}
            spec["template"] = template
            return {"apiVersion": "apps/v1", "kind": self.kind, "metadata": meta, "spec": spec}
        if self.kind == "Job":
            return {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": meta,
                "spec": {**self.workload, "template": _restart_never(template)},
            }
        if self.kind == "CronJob":
            job = {**self.workload, "template": _restart_never(template)}
            cron: Json = {"schedule": "0 3 * * *", "jobTemplate": {"spec": job}}
            if self.concurrency_policy is not None:
                cron["concurrencyPolicy"] = self.concurrency_policy
            return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta, "spec": cron}
        tasks = [
            {"name": name, "replicas": replicas, "template": copy.deepcopy(template)}
            for name, replicas in self.tasks
        ]
        spec: Json = {"schedulerName": "volcano", "minAvailable": 1, "tasks": tasks}
        queue = (
            TEAM_QUEUES.get(self.namespace, "")
            if self.volcano_queue is None
            else self.volcano_queue
        )
        if queue:
            spec["queue"] = queue
        return {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": meta,
            "spec": spec,
        }

    def _queued(self, template: Json) -> Json:
        """The template with its queue annotation (see `pod_queue`), unless it names one."""
        queue = TEAM_QUEUES.get(self.namespace, "") if self.pod_queue is None else self.pod_queue
        annotations = (template.get("metadata") or {}).get("annotations") or {}
        if (
            self.kind == "VolcanoJob"
            or not queue
            or QUEUE_ANNOTATION in annotations
            or not _requests_accelerators(template)
        ):
            return template
        template.setdefault("metadata", {}).setdefault("annotations", {})[QUEUE_ANNOTATION] = queue
        return template

    def in_queue(self, queue: str) -> Workload:
        """With this queue annotation (for a namespace outside `TEAM_QUEUES`)."""
        return replace(self, pod_queue=queue)

    def unqueued(self) -> Workload:
        """Without the queue annotation the gate requires of accelerator templates."""
        return replace(self, pod_queue="")

    def review(self, uid: str | None = None) -> Json:
        """The AdmissionReview (admission.k8s.io/v1) the API server would send."""
        group, version, kind, resource = {**GVK, **OPERATOR_GVK}[self.kind]
        request: Json = {
            "uid": uid or str(uuid.uuid4()),
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "requestKind": {"group": group, "version": version, "kind": kind},
            "name": self.name,
            "namespace": self.namespace,
            "operation": self.operation,
            "userInfo": {"username": self.username, "groups": ["system:authenticated"]},
            "object": self.object(),
            "oldObject": self.old_object,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": f"{self.operation.title()}Options"},
        }
        if self.sub_resource:
            request["subResource"] = self.sub_resource
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


GVK = {
    "Pod": ("", "v1", "Pod", "pods"),
    "Deployment": ("apps", "v1", "Deployment", "deployments"),
    "StatefulSet": ("apps", "v1", "StatefulSet", "statefulsets"),
    "Job": ("batch", "v1", "Job", "jobs"),
    "CronJob": ("batch", "v1", "CronJob", "cronjobs"),
    "VolcanoJob": ("batch.volcano.sh", "v1alpha1", "Job", "jobs"),
}
# The operators' kinds and issue 33's objects (tests/policies/operator_kinds.py).
OPERATOR_GVK = {
    "JobSet": ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"),
    "LeaderWorkerSet": ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets"),
    "RayCluster": ("ray.io", "v1", "RayCluster", "rayclusters"),
    "RayJob": ("ray.io", "v1", "RayJob", "rayjobs"),
    "TrainJob": ("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs"),
    "TrainingRuntime": ("trainer.kubeflow.org", "v1alpha1", "TrainingRuntime", "trainingruntimes"),
    "VolcanoCronJob": ("batch.volcano.sh", "v1alpha1", "CronJob", "cronjobs"),
    "OwnedPod": ("", "v1", "Pod", "pods"),
    "PodDisruptionBudget": ("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets"),
}


def _set(mapping: Json, key: str, value: str | None) -> None:
    if value is None:
        mapping.pop(key, None)
    else:
        mapping[key] = value


def _select(template: Json, selector: Mapping[str, str]) -> None:
    template["spec"].setdefault("nodeSelector", {}).update(selector)


def _restart_never(template: Json) -> Json:
    template["spec"].setdefault("restartPolicy", "Never")
    return template


def _template(workload_type: str, priority_class: str, model: str, gpus: int) -> Workload:
    key, value = MODEL_LABELS[model]
    return Workload(
        template={
            "metadata": {"labels": {WORKLOAD_TYPE: workload_type, "app": "w"}},
            "spec": {
                "priorityClassName": priority_class,
                "nodeSelector": {key: value},
                "containers": [
                    {
                        "name": "main",
                        "image": ALLOWED_IMAGE,
                        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                    }
                ],
            },
        }
    )


# ---------------------------------------------------------------- starting points


def training() -> Workload:
    """8 H100 on demand, training priority: allowed for research."""
    return _template("training", "fleetplane-training", "h100-80gb", 8)


def inference() -> Workload:
    """1 H100 on demand, inference priority: allowed for research and serving."""
    return _template("inference", "fleetplane-inference", "h100-80gb", 1)


def notebook() -> Workload:
    """1 A100 with a one-hour idle timeout: allowed for every team."""
    return _template("notebook", "fleetplane-notebook", "a100-40gb", 1).idle_timeout("3600")


def batch() -> Workload:
    """2 A100 pinned to spot: allowed for every team."""
    return _template("batch", "fleetplane-batch", "a100-40gb", 2).on_spot()


def cpu() -> Workload:
    """A pod without accelerators."""
    return Workload(
        template={
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "containers": [{"name": "main", "image": "registry.fleetplane.internal/web:1"}]
            },
        }
    )


# ---------------------------------------------------------------- answers


@dataclass(frozen=True)
class Verdict:
    """The admission response, read the way a test asserts on it."""

    response: Json

    @property
    def allowed(self) -> bool:
        return bool(self.response["allowed"])

    @property
    def uid(self) -> str:
        return str(self.response["uid"])

    @property
    def messages(self) -> list[str]:
        message = self.response.get("status", {}).get("message", "")
        return [line for line in message.split("\n") if line]

    @property
    def rules(self) -> set[str]:
        """The names of the violated rules (each message starts with `rule: `)."""
        return {m.split(":", 1)[0] for m in self.messages}

    @property
    def warnings(self) -> list[str]:
        return list(self.response.get("warnings", []))

    def says(self, text: str) -> bool:
        return any(text in m for m in self.messages)
