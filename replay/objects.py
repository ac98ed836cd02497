"""The replay's objects: jobs (one per trace pod, one pod per attempt), nodes and pools, and the
Kubernetes-shaped views the admission gate and the controller's decisions see of them.

A job's pods are what a user or a Job controller would create: a Pod labelled with its workload
type, in its team's namespace, with the priority class, node selector, tolerations and
annotations the admission gate asks for (`pod_manifest`). The controller sees the slim `Pod`
of `controller.observe.model` built from the same fields (`Job.view`), and nodes as
`controller.observe.model.Node` with the labels and taints `fleet.nodes` gives a pool.
"""

from __future__ import annotations

import bisect
import enum
import math
from dataclasses import dataclass, field
from typing import Any

from controller.observe.model import Node, Pod
from fleet import catalog
from fleet import labels as keys
from fleet.config import PoolConfig
from fleet.nodes import node_taints, observed_labels
from replay.node_pools import catalog_model
from replay.scenarios import Scenario
from replay.workloads import Workload

MILLI = 1000
"""Milli-GPUs in one GPU (the trace's `gpu_milli`)."""

TERMINATION_GRACE_SECONDS = 30
"""Kubernetes' default terminationGracePeriodSeconds: GPUs stay held this long after a pod is
evicted or deleted."""


class State(enum.Enum):
    WAITING = "waiting"  # not submitted yet, or stopped and about to be submitted again
    PENDING = "pending"  # admitted, not placed
    RUNNING = "running"
    DONE = "done"
    DENIED = "denied"  # a submission was refused by the admission gate
    RECLAIMED = "reclaimed"  # reclaimed while idle for the rest of its life


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolSpec:
    """A pool as the replay runs it."""

    config: PoolConfig
    gpus_per_node: int
    """Physical GPUs per node (what is billed)."""
    price_per_gpu_hour: float
    labels: dict[str, str]
    taints: tuple[dict[str, Any], ...]
    cpu_milli: int = 0
    """CPU per node, from the node list's shape; 0: not limited (pools written by hand)."""
    memory_mib: int = 0
    """Memory per node, likewise."""

    @property
    def sharing(self) -> bool:
        """Time-sliced GPUs: a pod asking for part of a GPU takes only that share of one."""
        return self.config.gpu_sharing is not None

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def spot(self) -> bool:
        return self.config.capacity_type == "spot"

    def node_view(self, name: str) -> Node:
        return Node(
            name=name,
            labels={**self.labels, "kubernetes.io/hostname": name},
            allocatable={self.config.resource: self.config.allocatable_per_node},
            taints=self.taints,
            ready=True,
            unschedulable=False,
        )


def pool_specs(scenario: Scenario) -> list[PoolSpec]:
    specs = []
    for pool in scenario.fleet.pools:
        if pool.accelerator.is_tpu:
            continue
        prices = scenario.fleet.models[pool.model].price_per_hour_usd
        shape = scenario.pool_shapes.get(pool.name)
        specs.append(
            PoolSpec(
                config=pool,
                gpus_per_node=pool.accelerators,
                cpu_milli=shape.cpu_milli if shape else 0,
                memory_mib=shape.memory_mib if shape else 0,
                price_per_gpu_hour=prices.spot
                if pool.capacity_type == "spot"
                else prices.on_demand,
                labels=observed_labels(scenario.fleet, pool),
                taints=tuple(node_taints(pool)),
            )
        )
    return specs


@dataclass(eq=False, slots=True, kw_only=True)
class SimNode:
    name: str
    pool: PoolSpec
    requested_at: float
    ready_at: float
    view: Node
    gpu_left: list[int]
    """Milli-GPUs free on each GPU."""
    cpu_free: int = 0
    memory_free: int = 0
    ready: bool = False
    gone_at: float | None = None
    jobs: list[Job] = field(default_factory=list)
    ghosts: list[Ghost] = field(default_factory=list)
    cpu_pods: list[Any] = field(default_factory=list)
    """The CPU-only pods running here (`replay.cpu_pods.CpuPod`)."""
    empty_since: float | None = None

    @property
    def empty(self) -> bool:
        return not self.jobs and not self.ghosts and not self.cpu_pods

    @property
    def free(self) -> int:
        """Wholly free GPUs."""
        return sum(1 for left in self.gpu_left if left == MILLI)

    @property
    def free_milli(self) -> int:
        return sum(self.gpu_left)

    def gpus_for(self, job: Job) -> tuple[int, ...] | None:
        """The GPUs the job would take here (a share: the fullest GPU with room, on a
        time-sliced pool; else wholly free GPUs, lowest first), or None when it does not fit:
        GPUs, CPU and memory (a pool without a shape limits GPUs only)."""
        pool = self.pool
        if pool.cpu_milli and (job.cpu_milli > self.cpu_free or job.memory_mib > self.memory_free):
            return None
        if pool.sharing and job.milli < MILLI:
            best = -1
            for i, left in enumerate(self.gpu_left):
                if left >= job.milli and (best < 0 or left < self.gpu_left[best]):
                    best = i
            return None if best < 0 else (best,)
        free = [i for i, left in enumerate(self.gpu_left) if left == MILLI]
        return tuple(free[: job.gpus]) if len(free) >= job.gpus else None

    def take(self, job: Job, gpus: tuple[int, ...]) -> int:
        """Hold the job's share of these GPUs, CPU and memory; the milli-GPUs held."""
        each = job.milli if self.pool.sharing and job.milli < MILLI else MILLI
        for i in gpus:
            self.gpu_left[i] -= each
        self.cpu_free -= job.cpu_milli
        self.memory_free -= job.memory_mib
        return each * len(gpus)

    def give_back(self, gpus: tuple[int, ...], milli: int, cpu: int, memory: int) -> None:
        each = milli // max(1, len(gpus))
        for i in gpus:
            self.gpu_left[i] += each
        self.cpu_free += cpu
        self.memory_free += memory


@dataclass(eq=False, slots=True, kw_only=True)
class Ghost:
    """A pod that was evicted or deleted and still holds its GPUs for the grace period; its
    job has moved on (a replacement may already be pending)."""

    view: Pod
    node: SimNode
    gpus: int
    """Requested (what counts against the team's quota)."""
    team: str
    hold_start: float
    release_at: float
    slots: tuple[int, ...] = ()
    held_milli: int = 0
    """Milli-GPUs held on `slots`."""
    cpu_milli: int = 0
    memory_mib: int = 0

    @property
    def held(self) -> float:
        """GPUs held (a share of one for a sharing pod on a time-sliced GPU)."""
        return self.held_milli / MILLI


@dataclass(eq=False, slots=True, kw_only=True)
class Job:
    """One trace pod through the replay: its attempts (pods), progress and what befell it."""

    workload: Workload
    gpus: int
    capacity: str
    namespace: str
    priority_class: str
    priority: int
    template: dict[str, Any]
    """Labels, annotations and spec shared by every pod of the job."""
    milli: int = MILLI
    """Per GPU: less than 1000 for a pod that asks for part of one GPU."""
    cpu_milli: int = 0
    memory_mib: int = 0
    slots: tuple[int, ...] = ()
    """The GPUs of its node it holds while running."""
    held_milli: int = 0
    """Milli-GPUs it holds while running (its share, on a time-sliced GPU)."""
    state: State = State.WAITING
    attempt: int = 0
    progress: float = 0.0
    """Progress (seconds of running) when the current run started, or when it stopped."""
    checkpoint: float = 0.0
    """Progress of the last completed checkpoint."""
    run_start: float | None = None
    node: SimNode | None = None
    submitted_at: float | None = None
    """First submission (the trace's creation time)."""
    attempt_created: float = 0.0
    pending_since: float | None = None
    first_start: float | None = None
    finished_at: float | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    """Annotations the controller wrote on the current pod."""
    view_cache: Pod | None = None
    view_checkpoint: float | None = None
    quota_blocked: bool = False
    _segment: int = 0
    # What befell it.
    preempted: int = 0
    interrupted: int = 0
    reclaimed: int = 0
    lost_seconds: float = 0.0
    """Progress lost to preemption and interruptions (per GPU)."""
    denied_rules: tuple[str, ...] = ()
    first_model: str | None = None
    """The GPU model of the node its first pod ran on."""
    first_slots: tuple[int, ...] = ()
    """The GPUs of that node it held."""
    pool_key: tuple[Any, ...] | None = None
    """What decides the pools it may land on (`FleetState.compatible_pools`), once computed."""

    @property
    def team(self) -> str:
        return self.workload.team

    @property
    def held(self) -> float:
        """GPUs held while running: the accounting's unit."""
        return self.held_milli / MILLI

    @property
    def workload_type(self) -> str:
        return self.workload.workload_type

    @property
    def name(self) -> str:
        return f"{self.workload.pod.name}-{self.attempt}"  # pod_name(attempt), inlined: hot

    @property
    def uid(self) -> str:
        return f"replay-{self.workload.index}-{self.attempt}"  # pod_uid(attempt), inlined: hot

    @property
    def required_affinity(self) -> tuple[dict[str, Any], ...]:
        affinity = self.template["spec"].get("affinity")
        if not affinity:
            return ()
        required = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        return tuple(required["nodeSelectorTerms"])

    def pod_name(self, attempt: int) -> str:
        return f"{self.workload.pod.name}-{attempt}"

    def pod_uid(self, attempt: int) -> str:
        return f"replay-{self.workload.index}-{attempt}"

    def progress_at(self, now: float) -> float:
        if self.state is State.RUNNING and self.run_start is not None:
            return self.progress + (now - self.run_start)
        return self.progress

    def util_at(self, now: float) -> float:
        """Utilisation now (percent), remembering the profile segment: progress only grows
        within a run, so the next look starts where the last one ended."""
        profile = self.workload.profile
        p = self.progress_at(now)
        ends = profile.ends
        i = self._segment
        last = len(ends) - 1
        if i > last or p < (ends[i - 1] if i > 0 else 0.0):
            i = min(bisect.bisect_right(ends, p), last)
        elif i < last and p >= ends[i]:
            i += 1
            if i < last and p >= ends[i]:
                i = min(bisect.bisect_right(ends, p), last)
        self._segment = i
        return profile.utils[i]

    def checkpoint_at(self, now: float) -> float:
        """Progress of the last checkpoint reached by `now` (checkpointing types only)."""
        every = self.workload.checkpoint_seconds
        if not every or self.state is not State.RUNNING:
            return self.checkpoint
        return max(self.checkpoint, math.floor(self.progress_at(now) / every) * every)

    def checkpoint_time(self, now: float) -> float | None:
        """When the current pod wrote its last checkpoint (trace seconds), None before its
        first one."""
        if self.run_start is None or self.state is not State.RUNNING:
            return None
        reached = self.checkpoint_at(now)
        if reached <= self.progress:
            return None
        return self.run_start + (reached - self.progress)

    def invalidate(self) -> None:
        self.view_cache = None

    def view(self, now: float, epoch: float) -> Pod:
        """The controller's slim view of the current pod."""
        if self.view_cache is not None and not self.workload.checkpoint_seconds:
            # A type that does not checkpoint keeps `checkpoint` at 0: no checkpoint time,
            # ever, so only `invalidate` changes its view (asked for every pod every period).
            return self.view_cache
        checkpoint = self.checkpoint_time(now)
        if self.view_cache is not None and checkpoint == self.view_checkpoint:
            return self.view_cache
        annotations = dict(self.template["annotations"])
        annotations.update(self.annotations)
        if checkpoint is not None:
            annotations[keys.LAST_CHECKPOINT] = str(int(epoch + checkpoint))
        running = self.state is State.RUNNING
        spec = self.template["spec"]
        pod = Pod(
            namespace=self.namespace,
            name=self.name,
            uid=self.uid,
            resource_version=str(self.attempt + 1),
            labels=dict(self.template["labels"]),
            annotations=annotations,
            owner=None,
            node_name=self.node.name if running and self.node else None,
            phase="Running" if running else "Pending",
            priority=self.priority,
            priority_class=self.priority_class,
            demand={keys.GPU_RESOURCE: self.gpus},
            created=epoch + self.attempt_created,
            started=epoch + self.run_start if running and self.run_start is not None else None,
            finished=None,
            deleting=False,
            unschedulable_since=(
                epoch + self.pending_since
                if self.state is State.PENDING and self.pending_since is not None
                else None
            ),
            node_selector=dict(spec["nodeSelector"]),
            required_affinity=self.required_affinity,
            tolerations=tuple(dict(t) for t in spec["tolerations"]),
            grace_seconds=TERMINATION_GRACE_SECONDS,
            containers=tuple(
                {"name": c["name"], "image": c["image"], "resources": c["resources"]}
                for c in spec["containers"]
            ),
        )
        self.view_cache = pod
        self.view_checkpoint = checkpoint
        return pod

    def manifest(self, attempt: int | None = None) -> dict[str, Any]:
        """The Pod a submission creates (what the admission gate reviews): the current
        attempt's, or another attempt's of the same job."""
        n = self.attempt if attempt is None else attempt
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self.pod_name(n),
                "namespace": self.namespace,
                "uid": self.pod_uid(n),
                "labels": dict(self.template["labels"]),
                "annotations": dict(self.template["annotations"]),
            },
            "spec": self.template["spec"],
        }

    def review(self, attempt: int | None = None) -> dict[str, Any]:
        """The AdmissionReview the API server sends for the pod's CREATE (the current
        attempt's, or another attempt's)."""
        pod = self.manifest(attempt)
        return {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": pod["metadata"]["uid"],
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "operation": "CREATE",
                "namespace": self.namespace,
                "name": pod["metadata"]["name"],
                "object": pod,
                "oldObject": None,
                "userInfo": {"username": f"{self.team}-user", "groups": ["system:authenticated"]},
            },
        }


def job_for(workload: Workload, scenario: Scenario) -> Job:
    """The job of a workload in a scenario: where it is submitted and what its pods carry."""
    fleet = scenario.fleet
    kind = workload.workload_type
    wt = fleet.workload_types[kind]
    team = fleet.team(workload.team)
    namespace = team.effective_namespaces[0]
    capacity = scenario.capacity_of(kind)
    classes = wt.priority_classes
    pc = classes[1] if workload.high_priority and len(classes) > 1 else classes[0]
    selector, affinity = model_placement(workload, scenario)
    tolerations: list[dict[str, Any]] = [
        {"key": keys.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
    ]
    if capacity == "spot":
        selector[keys.CAPACITY_TYPE] = "spot"
        tolerations.append(
            {
                "key": keys.CAPACITY_TYPE,
                "operator": "Equal",
                "value": "spot",
                "effect": "NoSchedule",
            }
        )
    # The team's Volcano queue (named after the team, fleet.render), which the gate requires
    # every accelerator pod of a team namespace to name.
    annotations: dict[str, str] = {keys.VOLCANO_QUEUE_NAME: team.name}
    if workload.checkpoint_seconds:
        annotations[keys.CHECKPOINT_LOCATION] = (
            f"s3://{workload.team}-checkpoints/{workload.pod.name}"
        )
    if wt.max_idle_timeout_seconds is not None:
        annotations[keys.IDLE_TIMEOUT_SECONDS] = str(min(3600, wt.max_idle_timeout_seconds))
    registry = fleet.registries[0] if fleet.registries else "nvcr.io/"
    template = {
        "labels": {keys.WORKLOAD_TYPE: kind, "app.kubernetes.io/name": kind},
        "annotations": annotations,
        "spec": {
            "priorityClassName": pc.name,
            "nodeSelector": selector,
            **({"affinity": affinity} if affinity else {}),
            "tolerations": tolerations,
            "containers": [
                {
                    "name": "main",
                    "image": f"{registry.rstrip('/')}/replay/{kind}:1",
                    "resources": {"limits": {keys.GPU_RESOURCE: str(workload.gpus)}},
                }
            ],
        },
    }
    pod = workload.pod
    return Job(
        workload=workload,
        gpus=workload.gpus,
        milli=pod.gpu_milli if pod.shared else MILLI,
        cpu_milli=pod.cpu_milli,
        memory_mib=pod.memory_mib,
        capacity=capacity,
        namespace=namespace,
        priority_class=pc.name,
        priority=pc.value,
        template=template,
    )


def model_placement(
    workload: Workload, scenario: Scenario
) -> tuple[dict[str, str], dict[str, Any] | None]:
    """The node selector and required node affinity that say which GPU models a pod accepts:
    the models its `gpu_spec` names, or any model of the fleet. The admission gate denies a pod
    that selects no model, so even a pod that takes any model says so (affinity `In` them all);
    one model is a plain node selector."""
    fleet_models: list[str] = []
    for pool in scenario.fleet.pools:
        if not pool.accelerator.is_tpu and pool.model not in fleet_models:
            fleet_models.append(pool.model)
    named = [catalog_model(m) for m in workload.pod.gpu_spec]
    accepted = [m for m in named if m in catalog.MODELS] if named else fleet_models
    if not accepted:
        accepted = fleet_models[:1]  # names no model the catalog knows: the gate decides
    models = [catalog.MODELS[m] for m in accepted]
    if len(models) == 1:
        return {models[0].node_label: models[0].label_value}, None
    term = {
        "matchExpressions": [
            {
                "key": models[0].node_label,
                "operator": "In",
                "values": [m.label_value for m in models],
            }
        ]
    }
    return {}, {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }
