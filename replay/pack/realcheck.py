"""The replay's model of a Volcano configuration (`volcano.VolcanoScoring`) held against the
real vc-scheduler: the same pods, in the same order, on the same nodes.

`sample` draws pods of a pod list (seeded) and a subset of the node list their GPUs roughly
fill; `run_on_volcano` creates those nodes as KWOK fake nodes and submits the pods one after
another, each waiting until Volcano binds it (or declares it unschedulable) before the next,
so the scheduler sees them in the model's arrival order, one per session, never two at once;
`compare` replays the same arrivals in the model and sets the two side by side.

Volcano takes a node at random among equal best scores (`SelectBestNodeAndScore`); the model
cannot predict that draw. So the comparison has two parts:

- decisions: every pod is scored by the model on the cluster as Volcano left it before that
  pod; the pod agrees when Volcano's node is among the model's best (a wrong score or a wrong
  fit shows here, with the figures);
- outcome: the model places the pods itself, taking Volcano's node when it is among its best
  and its own first-by-name otherwise; GPUs allocated per node and the unplaced pods are
  compared. The plain model (first by name always) is shown beside it.

GPU sharing (`gpu_milli` < 1000) is left out: the shipped configuration schedules
`nvidia.com/gpu` as whole devices (time-slicing is the device plugin's, invisible to Volcano),
so a share cannot be asked for on the real scheduler.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from controller.errors import NotFoundError
from controller.observe.kube import KubeClient, namespace_path, pod_path
from fleet import labels
from localfleet.fakenodes import KWOK_NODE_ANNOTATION, KWOK_NODE_VALUE
from replay.pack.cluster import Cluster
from replay.pack.volcano import VolcanoScoring
from replay.trace import PodRequest, TraceNode

CHECK_LABEL = "fleetplane.dev/pack-check"
"""On the check's nodes and pods: the pods' nodeSelector, so that nothing else is a candidate."""
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
SCHEDULER_NAME = "volcano"
MAX_PODS_PER_NODE = 110


@dataclass(frozen=True, kw_only=True)
class Sample:
    pods: list[PodRequest]
    """In arrival order."""
    nodes: list[TraceNode]


def sample(
    pods: Sequence[PodRequest],
    nodes: Sequence[TraceNode],
    *,
    count: int,
    seed: int,
    fill: float = 1.1,
) -> Sample:
    """`count` pods drawn without replacement (GPU-sharing pods left out), in the order drawn,
    and nodes drawn from the node list until the pods' GPUs are `fill` times theirs: a little
    more work than room, so that packing decides which pods find none."""
    whole = [p for p in pods if not p.shared]
    if count <= 0 or count > len(whole):
        raise ValueError(f"count must be 1..{len(whole)} (pods without GPU sharing), not {count}")
    rng = np.random.default_rng(seed)
    chosen = [whole[i] for i in rng.choice(len(whole), size=count, replace=False)]
    asked = sum(p.gpu_milli_total for p in chosen) / 1000
    picked: list[TraceNode] = []
    room = 0
    for i in rng.permutation(len(nodes)):
        if room * fill >= asked:
            break
        picked.append(nodes[i])
        room += nodes[i].gpus
    return Sample(pods=chosen, nodes=sorted(picked, key=lambda n: n.name))


# --- the real scheduler ----------------------------------------------------------------------


def node_manifest(node: TraceNode, run: str) -> dict[str, Any]:
    """A KWOK fake node of the trace node's shape: model label, GPUs, CPU, memory."""
    capacity = {
        "cpu": f"{node.cpu_milli}m",
        "memory": f"{node.memory_mib}Mi",
        "pods": str(MAX_PODS_PER_NODE),
        labels.GPU_RESOURCE: str(node.gpus),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": {
                "kubernetes.io/hostname": node.name,
                "kubernetes.io/os": "linux",
                "type": "kwok",
                labels.GPU_PRODUCT: node.model,
                CHECK_LABEL: run,
            },
            "annotations": {KWOK_NODE_ANNOTATION: KWOK_NODE_VALUE},
        },
        "status": {"capacity": dict(capacity), "allocatable": dict(capacity)},
    }


def pod_manifest(pod: PodRequest, *, namespace: str, queue: str, run: str) -> dict[str, Any]:
    """The pod as Volcano sees a trace pod: CPU and memory requests (a zero one left out, as
    Kubernetes treats it), whole GPUs, the accepted models as required node affinity."""
    requests: dict[str, str] = {}
    if pod.cpu_milli:
        requests["cpu"] = f"{pod.cpu_milli}m"
    if pod.memory_mib:
        requests["memory"] = f"{pod.memory_mib}Mi"
    resources: dict[str, Any] = {"requests": requests}
    if pod.num_gpu:
        resources["limits"] = {labels.GPU_RESOURCE: str(pod.num_gpu)}
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAME,
        "nodeSelector": {CHECK_LABEL: run},
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "pack-check", "resources": resources}],
    }
    if pod.gpu_spec:
        term = {"key": labels.GPU_PRODUCT, "operator": "In", "values": list(pod.gpu_spec)}
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [term]}]
                }
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": namespace,
            "labels": {CHECK_LABEL: run},
            "annotations": {QUEUE_ANNOTATION: queue},
        },
        "spec": spec,
    }


def queue_manifest(name: str) -> dict[str, Any]:
    """One queue without a capability: the cluster's room is the only limit."""
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "reclaimable": False},
    }


@dataclass(kw_only=True)
class RealRun:
    placement: dict[str, str | None]
    """Pod name → the node Volcano bound it to, None when it declared it unschedulable."""
    seconds: float
    timed_out: list[str] = field(default_factory=list)
    """Pods neither bound nor declared unschedulable in time (counted as unplaced)."""
    reasons: dict[str, str] = field(default_factory=dict)
    """Pod name → Volcano's fit errors, for each pod it declared unschedulable."""


def _unschedulable(pod: dict[str, Any]) -> str | None:
    """Volcano tried the pod on every node and none fits. Its PodScheduled condition says
    `Unschedulable` from the moment the pod is pending in a session, before any node was
    tried (the job's "not ready" message); only the fit errors of a tried pod read
    "0/<nodes> nodes are unavailable" (`FitErrors.Error`). Their message, or None."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        message = str(c.get("message", ""))
        if (
            c.get("type") == "PodScheduled"
            and c.get("status") == "False"
            and c.get("reason") == "Unschedulable"
            and message.startswith("0/")
            and "nodes are unavailable" in message
        ):
            return message
    return None


def _schedulable(node: dict[str, Any]) -> bool:
    """Ready, and without taints: the node lifecycle controller taints a new node
    `node.kubernetes.io/not-ready` until it sees it Ready, and Volcano's predicates honour it,
    so a node still tainted would be left out by Volcano and not by the model."""
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )
    return ready and not (node.get("spec") or {}).get("taints")


def nodes_schedulable(client: KubeClient, run: str) -> set[str]:
    return {
        n["metadata"]["name"]
        for n in client.list("/api/v1/nodes", params={"labelSelector": f"{CHECK_LABEL}={run}"})
        if _schedulable(n)
    }


def create_nodes(client: KubeClient, nodes: Sequence[TraceNode], run: str, timeout: float) -> None:
    """Create the fake nodes and wait until every one is Ready (KWOK) and untainted."""
    for node in nodes:
        client.create("/api/v1/nodes", node_manifest(node, run))
    deadline = time.monotonic() + timeout
    names = {n.name for n in nodes}
    while time.monotonic() < deadline:
        if names <= nodes_schedulable(client, run):
            return
        time.sleep(0.2)
    missing = sorted(names - nodes_schedulable(client, run))
    raise TimeoutError(
        f"{len(missing)} fake nodes not Ready and untainted within {timeout:.0f} s: "
        + ", ".join(missing[:10])
    )


def run_on_volcano(
    client: KubeClient,
    pods: Sequence[PodRequest],
    *,
    namespace: str,
    queue: str,
    run: str,
    per_pod_timeout: float = 20.0,
    poll: float = 0.05,
    log: Callable[[str], None] = lambda message: None,
) -> RealRun:
    """Submit the pods one after another and wait for each to be bound or declared
    unschedulable (then delete it: it holds nothing, and every later pod asks a fuller
    cluster, so it would never fit). The nodes must exist and the queue too."""
    began = time.monotonic()
    placement: dict[str, str | None] = {}
    timed_out: list[str] = []
    reasons: dict[str, str] = {}
    for index, pod in enumerate(pods):
        client.create(
            pod_path(namespace), pod_manifest(pod, namespace=namespace, queue=queue, run=run)
        )
        deadline = time.monotonic() + per_pod_timeout
        while True:
            got = client.get(pod_path(namespace, pod.name))
            node = (got.get("spec") or {}).get("nodeName")
            if node:
                placement[pod.name] = node
                break
            reason = _unschedulable(got)
            if reason is not None or time.monotonic() > deadline:
                if reason is None:
                    timed_out.append(pod.name)
                else:
                    reasons[pod.name] = reason
                placement[pod.name] = None
                client.delete(pod_path(namespace, pod.name), {"gracePeriodSeconds": 0})
                break
            time.sleep(poll)
        if (index + 1) % 50 == 0:
            log(f"{index + 1}/{len(pods)} pods submitted, {time.monotonic() - began:.0f} s")
    return RealRun(
        placement=placement,
        seconds=time.monotonic() - began,
        timed_out=timed_out,
        reasons=reasons,
    )


def clean_up(
    client: KubeClient,
    *,
    namespace: str,
    nodes: Sequence[TraceNode],
    queue: str,
    timeout: float = 60.0,
) -> None:
    """Delete the check's pods and wait until they are gone, then its namespace, nodes and
    queue; what is gone already is fine. Waiting matters: a later check creates nodes of the
    same names, and pods of this one still terminating there would fill them in Volcano's
    view (not in the model's)."""
    with contextlib.suppress(NotFoundError):
        client.delete(pod_path(namespace), {"gracePeriodSeconds": 0})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if not client.list(pod_path(namespace)):
                break
        except NotFoundError:
            break
        time.sleep(0.2)
    else:
        raise TimeoutError(f"pods of {namespace} still there after {timeout:.0f} s")
    paths = [namespace_path(namespace)]
    paths += [f"/api/v1/nodes/{n.name}" for n in nodes]
    paths.append(f"/apis/scheduling.volcano.sh/v1beta1/queues/{queue}")
    for path in paths:
        with contextlib.suppress(NotFoundError):
            client.delete(path, {"gracePeriodSeconds": 0})


# --- the model beside it ---------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Decision:
    """One pod scored by the model on the cluster as Volcano left it before the pod."""

    pod: str
    real: str | None
    best: tuple[str, ...]
    """The model's nodes of highest score (empty: the pod fits nowhere in the model)."""
    best_score: float | None
    real_score: float | None
    """The model's score of Volcano's node (None when the model says the pod does not fit
    there, or Volcano left the pod unplaced)."""
    fits_in_model: bool
    """Whether the model has room for the pod on Volcano's node."""
    detail: str = ""
    """The pod's request and what the model has free on the nodes in question."""

    @property
    def agrees(self) -> bool:
        return self.real in self.best if self.real else not self.best


def decisions(
    pods: Sequence[PodRequest],
    nodes: Sequence[TraceNode],
    real: dict[str, str | None],
    policy: VolcanoScoring,
) -> list[Decision]:
    """Each pod scored by the model on Volcano's cluster state before it; the state then takes
    Volcano's placement (when the model has room for it there)."""
    cluster = Cluster(nodes)
    index = {name: i for i, name in enumerate(cluster.names)}
    out: list[Decision] = []
    for pod in pods:
        d = cluster.demand(pod)
        fitting = policy.fitting(cluster, d)
        where = real.get(pod.name)
        best: tuple[str, ...] = ()
        best_score = real_score = None
        if len(fitting):
            scores = policy.scores(cluster, d, fitting)
            top = scores.max()
            best = tuple(cluster.names[i] for i in fitting[scores == top])
            best_score = float(top)
            if where is not None and index.get(where, -1) in fitting:
                real_score = float(scores[list(fitting).index(index[where])])
        fits = where is not None and where in index and index[where] in set(fitting.tolist())
        detail = ""
        if (where in best) != (where is not None and bool(best)) or (where is None) != (not best):
            shown = [n for n in (where, *best[:1]) if n is not None]
            detail = f"asks cpu {d.cpu}m mem {d.memory}Mi gpus {d.num_gpu}; free: " + "; ".join(
                f"{n} cpu {cluster.cpu_left[index[n]]}/{cluster.cpu_capacity[index[n]]}m "
                f"mem {cluster.memory_left[index[n]]}/{cluster.memory_capacity[index[n]]}Mi "
                f"gpus {cluster.free_gpus[index[n]]}/{cluster.gpus[index[n]]}"
                for n in shown
            )
        out.append(
            Decision(
                pod=pod.name,
                real=where,
                best=best,
                best_score=best_score,
                real_score=real_score,
                fits_in_model=fits,
                detail=detail,
            )
        )
        if fits:
            node = index[where]  # type: ignore[index]
            cluster.place(node, d, cluster.whole_gpus(node, d.num_gpu))
    return out


def model_placement(
    pods: Sequence[PodRequest],
    nodes: Sequence[TraceNode],
    policy: VolcanoScoring,
    *,
    prefer: dict[str, str | None] | None = None,
) -> dict[str, str | None]:
    """Where the model puts each pod: among its best nodes the one `prefer` names if any
    (Volcano's random pick among equals), else the first by name."""
    cluster = Cluster(nodes)
    out: dict[str, str | None] = {}
    for pod in pods:
        d = cluster.demand(pod)
        fitting = policy.fitting(cluster, d)
        if len(fitting) == 0:
            out[pod.name] = None
            continue
        scores = policy.scores(cluster, d, fitting)
        best = fitting[scores == scores.max()]
        node = int(best[0])
        wanted = (prefer or {}).get(pod.name)
        for i in best:
            if cluster.names[int(i)] == wanted:
                node = int(i)
        cluster.place(node, d, cluster.whole_gpus(node, d.num_gpu))
        out[pod.name] = cluster.names[node]
    return out


def gpus_per_node(
    pods: Sequence[PodRequest], nodes: Sequence[TraceNode], placement: dict[str, str | None]
) -> dict[str, int]:
    used = {n.name: 0 for n in nodes}
    for pod in pods:
        where = placement.get(pod.name)
        if where is not None:
            used[where] += pod.num_gpu
    return used


@dataclass(kw_only=True)
class Outcome:
    """GPUs allocated per node and unplaced pods, Volcano's against one model run's."""

    label: str
    nodes: int
    differing: list[tuple[str, int, int]]
    """(node, GPUs Volcano allocated, GPUs the model allocated) where they differ."""
    unplaced_real: set[str]
    unplaced_model: set[str]

    @property
    def agreeing(self) -> int:
        return self.nodes - len(self.differing)

    @property
    def share(self) -> float:
        return self.agreeing / self.nodes


def outcome(
    label: str,
    pods: Sequence[PodRequest],
    nodes: Sequence[TraceNode],
    real: dict[str, str | None],
    model: dict[str, str | None],
) -> Outcome:
    got = gpus_per_node(pods, nodes, real)
    want = gpus_per_node(pods, nodes, model)
    return Outcome(
        label=label,
        nodes=len(nodes),
        differing=[(n, got[n], want[n]) for n in sorted(got) if got[n] != want[n]],
        unplaced_real={p for p, n in real.items() if n is None},
        unplaced_model={p for p, n in model.items() if n is None},
    )


@dataclass(kw_only=True)
class Comparison:
    configuration: str
    pods: int
    nodes: int
    gpus: int
    real_seconds: float
    decisions: list[Decision]
    tie_aware: Outcome
    first_by_name: Outcome
    timed_out: list[str]
    reasons: dict[str, str] = field(default_factory=dict)
    """Volcano's fit errors for the pods it left unplaced."""

    @property
    def decisions_agreeing(self) -> int:
        return sum(d.agrees for d in self.decisions)

    def text(self) -> str:
        """The figures, and for every disagreement the pod, the nodes and the scores."""
        lines = [
            f"{self.configuration}: {self.pods} pods on {self.nodes} nodes ({self.gpus} GPUs), "
            f"real vc-scheduler {self.real_seconds:.0f} s",
            f"decisions: {self.decisions_agreeing}/{len(self.decisions)} pods went where the "
            "model scores best (on Volcano's cluster state before each pod)",
        ]
        for o in (self.tie_aware, self.first_by_name):
            lines.append(
                f"outcome ({o.label}): GPUs per node agree on {o.agreeing}/{o.nodes} nodes "
                f"({100 * o.share:.1f} %); unplaced: Volcano {len(o.unplaced_real)}, "
                f"model {len(o.unplaced_model)}, in both {len(o.unplaced_real & o.unplaced_model)}"
            )
        for d in self.decisions:
            if d.agrees:
                continue
            if d.real is None:
                why = "Volcano left it unplaced, the model fits it"
            elif not d.fits_in_model:
                why = "the model has no room for it on Volcano's node"
            else:
                why = f"model score there {d.real_score:.4f} < best {d.best_score:.4f}"
            best = ", ".join(d.best[:4]) + (" ..." if len(d.best) > 4 else "")
            lines.append(f"  {d.pod}: Volcano → {d.real}, model best → [{best}]: {why}")
            if d.detail:
                lines.append(f"    {d.detail}")
            if d.real is None and d.pod in self.reasons:
                lines.append(f"    Volcano: {self.reasons[d.pod]}")
        for o in (self.tie_aware,):
            for node, got, want in o.differing:
                lines.append(f"  node {node}: Volcano {got} GPUs, model ({o.label}) {want}")
        if self.timed_out:
            lines.append(f"  timed out (counted unplaced): {', '.join(self.timed_out)}")
        return "\n".join(lines)


def compare(
    configuration: str,
    pods: Sequence[PodRequest],
    nodes: Sequence[TraceNode],
    real: RealRun,
    policy: VolcanoScoring,
) -> Comparison:
    return Comparison(
        configuration=configuration,
        pods=len(pods),
        nodes=len(nodes),
        gpus=sum(n.gpus for n in nodes),
        real_seconds=real.seconds,
        decisions=decisions(pods, nodes, real.placement, policy),
        tie_aware=outcome(
            "ties to Volcano's pick",
            pods,
            nodes,
            real.placement,
            model_placement(pods, nodes, policy, prefer=real.placement),
        ),
        first_by_name=outcome(
            "ties to the first name",
            pods,
            nodes,
            real.placement,
            model_placement(pods, nodes, policy),
        ),
        timed_out=real.timed_out,
        reasons=real.reasons,
    )
