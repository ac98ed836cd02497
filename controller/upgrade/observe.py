"""The read-only snapshot one upgrade pass decides on.

Nodes of the rolled pools come from one list (label selector on `fleetplane.dev/pool`); pods are
listed only for nodes whose state needs them (`states.NEEDS_PODS`), one `spec.nodeName` field
selector each, in parallel, so the cost of a pass follows the nodes in the rollout rather than
the size of the cluster. While a maintenance window is open the nodes waiting for admission
are listed too, and the namespaces of the gangs (Volcano PodGroups) with a pod on a listed
node, to know every node such a gang runs on. PodDisruptionBudgets are listed once, to explain evictions a budget
refuses. Everything is slimmed into frozen views; decisions never see raw JSON.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from controller.log import Log
from controller.observe.kube import KubeClient
from controller.observe.model import DisruptionBudget, pdb_from_api, selector_matches
from controller.upgrade import states
from controller.upgrade.consumers import Role, controller_kind, pod_role, uses_gpu
from controller.upgrade.limits import in_any_window
from controller.upgrade.settings import UpgradeSettings
from controller.upgrade.states import Detail
from fleet import labels as keys

GANG_ANNOTATION = "scheduling.k8s.io/group-name"
"""The PodGroup a pod belongs to, as Volcano annotates the pods it schedules: Volcano runs a
gang's pods together or not at all, so draining one node of a gang stops all of it."""


def driver_version(labels: dict[str, str]) -> str | None:
    """The driver the node runs, as GPU feature discovery reports it: major.minor[.rev]."""
    major = labels.get(keys.CUDA_DRIVER_MAJOR)
    minor = labels.get(keys.CUDA_DRIVER_MINOR)
    if not major or not minor:
        return None
    rev = labels.get(keys.CUDA_DRIVER_REV)
    return f"{major}.{minor}.{rev}" if rev else f"{major}.{minor}"


def _count(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


@dataclass(frozen=True, kw_only=True)
class NodeView:
    name: str
    pool: str
    labels: dict[str, str]
    annotations: dict[str, str]
    resource_version: str
    unschedulable: bool
    ready: bool
    taints: tuple[dict[str, Any], ...]
    gpu_capacity: int
    gpu_allocatable: int
    driver: str | None
    state: str | None
    since: float | None
    detail: Detail

    @property
    def unavailable(self) -> bool:
        """Out of service for any reason: cordoned, NotReady, or in the rollout or failed."""
        return (
            self.unschedulable
            or not self.ready
            or self.state in states.IN_PROGRESS
            or self.state == states.UPGRADE_FAILED
        )

    def manifest(self) -> dict[str, Any]:
        """A Node-shaped dict of the fields kept: the `node` of the OPA decision input."""
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": dict(self.labels),
                "annotations": dict(self.annotations),
            },
            "spec": {"unschedulable": self.unschedulable, "taints": [dict(t) for t in self.taints]},
        }


def node_view(raw: dict[str, Any]) -> NodeView:
    metadata = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    capacity = status.get("capacity") or {}
    allocatable = status.get("allocatable") or {}
    gpus = _count(capacity.get(keys.GPU_RESOURCE, 0)) or _count(labels.get(keys.GPU_COUNT, 0))
    since_text = annotations.get(states.SINCE_ANNOTATION)
    try:
        since = float(since_text) if since_text else None
    except ValueError:
        since = None
    return NodeView(
        name=metadata.get("name", ""),
        pool=labels.get(keys.POOL, ""),
        labels=labels,
        annotations=annotations,
        resource_version=metadata.get("resourceVersion", ""),
        unschedulable=bool(spec.get("unschedulable")),
        ready=any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or ()
        ),
        taints=tuple(spec.get("taints") or ()),
        gpu_capacity=gpus,
        gpu_allocatable=_count(allocatable.get(keys.GPU_RESOURCE, 0)),
        driver=driver_version(labels),
        state=labels.get(states.STATE_LABEL),
        since=since,
        detail=Detail.decode(annotations.get(states.DETAIL_ANNOTATION)),
    )


@dataclass(frozen=True, kw_only=True)
class Terminated:
    exit_code: int
    message: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class PodView:
    namespace: str
    name: str
    uid: str
    labels: dict[str, str]
    role: Role
    owner_kind: str | None
    phase: str
    deleting: bool
    ready: bool
    gpu: str | None
    """Why the pod counts as using the GPU; None when it does not (or its role never blocks)."""
    last_checkpoint: float | None
    """`fleetplane.dev/last-checkpoint` as a number, unchecked: use `checkpoint_at`."""
    attempt: int | None
    """Validator pods: the attempt they belong to."""
    terminated: Terminated | None
    """First container's terminated state, if it has one."""
    checkpoint_text: str | None = None
    """The annotation as written, to name it when it is malformed."""
    gang: str | None = None
    """The Volcano PodGroup it belongs to (`scheduling.k8s.io/group-name`), if any."""
    node: str | None = None
    """`spec.nodeName`."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def active(self) -> bool:
        return self.phase not in ("Succeeded", "Failed")


def pod_view(raw: dict[str, Any], settings: UpgradeSettings) -> PodView:
    metadata = raw.get("metadata") or {}
    status = raw.get("status") or {}
    role = pod_role(
        raw, driver_namespace=settings.driver_namespace, driver_selector=settings.driver_selector
    )
    annotations = metadata.get("annotations") or {}
    labels = metadata.get("labels") or {}
    checkpoint_text = annotations.get(keys.LAST_CHECKPOINT)
    try:
        checkpoint = float(checkpoint_text) if checkpoint_text is not None else None
    except (TypeError, ValueError):
        checkpoint = None
    terminated = None
    container_statuses = status.get("containerStatuses") or ()
    if container_statuses:
        state = (container_statuses[0].get("state") or {}).get("terminated")
        if isinstance(state, dict):
            terminated = Terminated(
                exit_code=code if isinstance(code := state.get("exitCode"), int) else -1,
                message=str(state.get("message") or ""),
                reason=str(state.get("reason") or ""),
            )
    attempt_text = labels.get(states.VALIDATOR_ATTEMPT_LABEL)
    return PodView(
        namespace=metadata.get("namespace", ""),
        name=metadata.get("name", ""),
        uid=metadata.get("uid", ""),
        labels=labels,
        role=role,
        owner_kind=controller_kind(metadata),
        phase=status.get("phase") or "Pending",
        deleting=bool(metadata.get("deletionTimestamp")),
        ready=any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or ()
        ),
        gpu=uses_gpu(raw, role),
        last_checkpoint=checkpoint,
        attempt=int(attempt_text) if attempt_text and attempt_text.isdigit() else None,
        terminated=terminated,
        checkpoint_text=None if checkpoint_text is None else str(checkpoint_text),
        gang=annotations.get(GANG_ANNOTATION) or None,
        node=(raw.get("spec") or {}).get("nodeName") or None,
    )


def checkpoint_problem(pod: PodView, now: float) -> str | None:
    """What is wrong with the pod's `fleetplane.dev/last-checkpoint` at `now`; None when it is
    absent or a plausible time: epoch seconds, finite, after 1970 and not in the future (a value
    in milliseconds, "inf" or a clock ahead of ours would otherwise read as "just checkpointed")."""
    if pod.checkpoint_text is None:
        return None
    at = pod.last_checkpoint
    if at is None or not math.isfinite(at):
        return "not a finite number of epoch seconds"
    if at <= 0:
        return "not after 1970"
    if at > now:
        return f"{at - now:.0f}s in the future (epoch seconds expected)"
    return None


def checkpoint_at(pod: PodView, now: float) -> float | None:
    """When the pod last checkpointed, if its annotation is trustworthy at `now`; a malformed
    or future one counts as no checkpoint at all."""
    return None if checkpoint_problem(pod, now) is not None else pod.last_checkpoint


@dataclass(kw_only=True)
class UpgradeSnapshot:
    taken_at: float
    nodes: list[NodeView]
    pods: dict[str, list[PodView]] = field(default_factory=dict)
    """Pods per node, for the nodes whose state needs them."""
    pdbs: list[DisruptionBudget] = field(default_factory=list)
    gang_nodes: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    """The nodes every active pod of a gang runs on, by (namespace, PodGroup), for the gangs
    with a pod on a listed node."""

    def pods_on(self, node: str) -> list[PodView]:
        return self.pods.get(node, [])

    def gangs_on(self, node: str) -> dict[tuple[str, str], frozenset[str]]:
        """The gangs with an active pod on the node, and every node their pods run on."""
        out: dict[tuple[str, str], frozenset[str]] = {}
        for pod in self.pods_on(node):
            if pod.gang and pod.active and not pod.deleting:
                key = (pod.namespace, pod.gang)
                out[key] = self.gang_nodes.get(key, frozenset()) | {node}
        return out


def pdb_blocking(pdbs: list[DisruptionBudget], pod: PodView) -> DisruptionBudget | None:
    """A budget that selects the pod and allows no disruption right now."""
    for pdb in pdbs:
        if (
            pdb.namespace == pod.namespace
            and pdb.disruptions_allowed <= 0
            and selector_matches(pdb.selector, pod.labels)
        ):
            return pdb
    return None


def take_upgrade_snapshot(
    kube: KubeClient, settings: UpgradeSettings, *, log: Log | None = None, workers: int = 8
) -> UpgradeSnapshot:
    log = log or Log()
    started = time.monotonic()
    nodes: list[NodeView] = []
    if settings.pools:
        selector = f"{keys.POOL} in ({','.join(sorted(settings.pools))})"
        nodes = [
            node_view(raw) for raw in kube.list("/api/v1/nodes", params={"labelSelector": selector})
        ]
    # Nodes waiting for admission are listed too while a window is open: admitting one that
    # hosts part of a gang needs the gang's other nodes (plan._admit).
    admitting = in_any_window(settings.windows, time.time())
    wanted = [
        n.name
        for n in nodes
        if n.state in states.NEEDS_PODS or (admitting and n.state == states.UPGRADE_REQUIRED)
    ]

    def pods_of(name: str) -> list[PodView]:
        items = kube.list("/api/v1/pods", params={"fieldSelector": f"spec.nodeName={name}"})
        return [pod_view(raw, settings) for raw in items]

    def budgets() -> list[DisruptionBudget]:
        return [pdb_from_api(raw) for raw in kube.list("/apis/policy/v1/poddisruptionbudgets")]

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(wanted) + 1))) as pool:
        pdb_future = pool.submit(budgets)
        futures = {name: pool.submit(pods_of, name) for name in wanted}
        pods = {name: future.result() for name, future in futures.items()}
        pdbs = pdb_future.result()
    gang_namespaces = sorted(
        {p.namespace for on_node in pods.values() for p in on_node if p.gang and p.active}
    )

    def gang_pods_in(namespace: str) -> list[PodView]:
        items = kube.list(f"/api/v1/namespaces/{namespace}/pods")
        return [pod_view(raw, settings) for raw in items]

    gang_nodes: dict[tuple[str, str], set[str]] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(gang_namespaces)))) as pool:
        for found in pool.map(gang_pods_in, gang_namespaces):
            for view in found:
                if view.gang and view.node and view.active and not view.deleting:
                    gang_nodes.setdefault((view.namespace, view.gang), set()).add(view.node)
    snapshot = UpgradeSnapshot(
        taken_at=time.time(),
        nodes=nodes,
        pods=pods,
        pdbs=pdbs,
        gang_nodes={key: frozenset(on) for key, on in gang_nodes.items()},
    )
    for node_name, on_node in pods.items():
        for view in on_node:
            problem = checkpoint_problem(view, snapshot.taken_at)
            if problem is not None:
                log.warning(
                    "upgrade.checkpoint.malformed",
                    pod=view.key,
                    node=node_name,
                    annotation=keys.LAST_CHECKPOINT,
                    value=view.checkpoint_text,
                    problem=f"{problem}; the pod counts as not checkpointed",
                )
    log.info(
        "upgrade.observe",
        nodes=len(nodes),
        nodes_with_pods=len(pods),
        pods=sum(len(p) for p in pods.values()),
        pdbs=len(pdbs),
        seconds=round(time.monotonic() - started, 3),
    )
    return snapshot
