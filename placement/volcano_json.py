"""Volcano's extender request, read into what FGD scores: the task's demand and the candidate
nodes' free resources as arrays.

vc-scheduler's extender plugin (volcano.sh/volcano v1.15, pkg/scheduler/plugins/extender)
POSTs `PrioritizeRequest{task, nodes}` as Go's encoding/json writes its scheduler cache types:
`TaskInfo` and `NodeInfo` with their exported field names (`Resreq`, `Idle`, `Allocatable`,
`Tasks`, `Node`, `Pod`, ...). Resources are `Resource{MilliCPU, Memory, ScalarResources}`,
scalar resources in milli-units (one `nvidia.com/gpu` is 1000). The nodes are the ones that
passed Volcano's predicates for the task, with the session's state: tasks the session already
placed count as used, so the members of a gang are scored one after another on the cluster
their predecessors leave.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fleet import labels
from fleet.placement import GPU_SHARE_ANNOTATION
from placement.fgd import MILLI, Demand, Nodes, TypicalPods


class BadRequest(ValueError):
    """The request is not what Volcano sends."""


@dataclass(frozen=True, kw_only=True)
class Task:
    uid: str
    demand: Demand
    gpu_spec: tuple[str, ...]


def _scalar(resource: dict[str, Any] | None, name: str) -> float:
    scalars = (resource or {}).get("ScalarResources") or {}
    return float(scalars.get(name) or 0.0)


def _share(pod: dict[str, Any]) -> int:
    """The pod's GPU share (milli-GPUs) from its annotation, 0 without one or a bad one."""
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(GPU_SHARE_ANNOTATION)
    try:
        milli = int(str(raw))
    except ValueError:
        return 0
    return milli if 0 < milli < MILLI else 0


def gpu_spec(pod: dict[str, Any]) -> tuple[str, ...]:
    """The GPU models the pod accepts: its nodeSelector's or required node affinity's values of
    the GPU product label (affinity terms are alternatives: a term without it accepts any
    model). Empty: any model."""
    spec = pod.get("spec") or {}
    selected = (spec.get("nodeSelector") or {}).get(labels.GPU_PRODUCT)
    if selected:
        return (str(selected),)
    required = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or []
    models: set[str] = set()
    for term in required:
        values = [
            str(v)
            for e in term.get("matchExpressions") or []
            if e.get("key") == labels.GPU_PRODUCT and e.get("operator") == "In"
            for v in e.get("values") or []
        ]
        if not values:
            return ()
        models.update(values)
    return tuple(sorted(models))


def _is_object(value: Any) -> bool:
    """A JSON object: a dict, or simdjson's lazy Object (read field by field)."""
    return value is not None and hasattr(value, "get") and hasattr(value, "keys")


def read_task(task: Any) -> Task:
    if not _is_object(task):
        raise BadRequest("the request has no task")
    resreq = task.get("Resreq") or {}
    pod = task.get("Pod") or {}
    gpus = _scalar(resreq, labels.GPU_RESOURCE) / MILLI
    share = _share(pod)
    if gpus >= 1:
        demand = Demand(
            cpu_milli=int(resreq.get("MilliCPU") or 0), num_gpu=int(gpus), gpu_milli=MILLI
        )
    elif share:
        demand = Demand(cpu_milli=int(resreq.get("MilliCPU") or 0), num_gpu=1, gpu_milli=share)
    else:
        demand = Demand(cpu_milli=int(resreq.get("MilliCPU") or 0), num_gpu=0, gpu_milli=0)
    uid = str(task.get("UID") or (pod.get("metadata") or {}).get("uid") or task.get("Name") or "")
    return Task(uid=uid, demand=demand, gpu_spec=gpu_spec(pod))


@dataclass(frozen=True, kw_only=True)
class NodeTable:
    """The candidate nodes of one request: names, GPU models and free resources."""

    names: list[str]
    models: list[str]
    gpus: np.ndarray
    cpu_left: np.ndarray
    gpu_left: np.ndarray
    """N x G milli-GPUs free per GPU."""

    def for_typical(self, typical: TypicalPods) -> Nodes:
        distinct = sorted(set(self.models))
        index = {m: i for i, m in enumerate(distinct)}
        accepts = typical.accepts(distinct).T  # models x T
        rows = np.array([index[m] for m in self.models], dtype=np.int64)
        return Nodes(gpu_left=self.gpu_left, cpu_left=self.cpu_left, accepts=accepts[rows])


def read_nodes(nodes: Any, *, shares: bool = True) -> NodeTable:
    """The candidate nodes (a list, or simdjson's lazy Array). `shares`: look for GPU shares
    among the nodes' tasks (the service passes False when the request names no share
    annotation at all, which spares reading every pod of the cluster)."""
    if nodes is None or isinstance(nodes, (str, bytes, dict)) or not hasattr(nodes, "__len__"):
        raise BadRequest("the request has no node list")
    names: list[str] = []
    models: list[str] = []
    gpus = np.zeros(len(nodes), dtype=np.int64)
    idle_gpus = np.zeros(len(nodes), dtype=np.int64)
    cpu_left = np.zeros(len(nodes), dtype=np.int64)
    shared: dict[int, list[int]] = {}
    for i, node in enumerate(nodes):
        name = node.get("Name") or ((node.get("Node") or {}).get("metadata") or {}).get("name")
        if not name:
            raise BadRequest(f"node {i} has no name")
        names.append(str(name))
        meta = (node.get("Node") or {}).get("metadata") or {}
        models.append(str((meta.get("labels") or {}).get(labels.GPU_PRODUCT, "")))
        gpus[i] = int(_scalar(node.get("Allocatable"), labels.GPU_RESOURCE) // MILLI)
        idle = node.get("Idle") or {}
        idle_gpus[i] = min(int(_scalar(idle, labels.GPU_RESOURCE) // MILLI), gpus[i])
        cpu_left[i] = int(idle.get("MilliCPU") or 0)
        # Pods sharing a GPU ask Volcano for none: their shares are counted from the tasks.
        for task in (node.get("Tasks") or {}).values() if shares else ():
            if _scalar(task.get("Resreq"), labels.GPU_RESOURCE) == 0:
                share = _share(task.get("Pod") or {})
                if share:
                    shared.setdefault(i, []).append(share)
    width = max(1, int(gpus.max()) if len(gpus) else 1)
    columns = np.arange(width)
    gpu_left = np.where(columns[None, :] < idle_gpus[:, None], MILLI, 0).astype(np.int64)
    for i, taken in shared.items():
        row = gpu_left[i]
        for share in taken:
            # The device plugin's pick is not known here: best fit, as FGD itself would place.
            holds = np.flatnonzero(row >= share)
            if len(holds):
                row[holds[np.argmin(row[holds])]] -= share
    return NodeTable(names=names, models=models, gpus=gpus, cpu_left=cpu_left, gpu_left=gpu_left)
