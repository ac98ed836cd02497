"""One read-only snapshot of the cluster, taken at the start of a pass.

Decisions are made on the snapshot only (Kueue's decide-then-act); acting re-reads an object
only when a write conflicts. The lists run in parallel threads; pods are slimmed page by page and
only pods that hold or request accelerators are kept. Pods and nodes are listed as Kubernetes
protobuf (`observe.proto`), the rest as JSON.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from controller.errors import NotFoundError
from controller.log import Log
from controller.observe.dra_claims import (
    CLAIM_APIS,
    ClaimObject,
    claim_from_api,
    with_claimed_devices,
)
from controller.observe.kube import KubeClient
from controller.observe.model import (
    DecodeError,
    DisruptionBudget,
    Namespace,
    Node,
    Pod,
    accelerator_pod_from_api,
    namespace_from_api,
    node_from_api,
    pdb_from_api,
    plain,
)
from controller.observe.operator_objects import list_operator_objects
from controller.observe.proto import NodeList, PodList, accelerator_pod_from_proto, node_from_proto
from controller.observe.watched import WatchedFleet
from controller.observe.workload_objects import (
    WORKLOAD_APIS,
    WorkloadObject,
    workload_object_from_api,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class VolcanoObject:
    """A Volcano PodGroup, Job or Queue: identity and the few status fields a pass reports."""

    kind: str
    namespace: str
    name: str
    phase: str
    queue: str | None
    min_member: int | None = None
    """A PodGroup's `spec.minMember`: how many of its pods Volcano places together or not at
    all (None for the other kinds, or when the field is absent or not a whole number)."""


@dataclass(kw_only=True)
class Snapshot:
    taken_at: float
    nodes: dict[str, Node]
    pods: list[Pod]
    namespaces: dict[str, Namespace]
    pdbs: list[DisruptionBudget]
    priority_classes: dict[str, int]
    volcano: list[VolcanoObject] = field(default_factory=list)
    workload_objects: list[WorkloadObject] = field(default_factory=list)
    claims: list[ClaimObject] = field(default_factory=list)
    """DRA ResourceClaims and ResourceClaimTemplates (observe/dra_claims.py)."""
    missing_apis: list[str] = field(default_factory=list)
    _node_index: dict[str, list[Pod]] | None = field(default=None, repr=False)

    def pods_on(self, node: str) -> list[Pod]:
        return self._by_node().get(node, [])

    def _by_node(self) -> dict[str, list[Pod]]:
        cached = self._node_index
        if cached is None:
            cached = {}
            for pod in self.pods:
                if pod.node_name:
                    cached.setdefault(pod.node_name, []).append(pod)
            self._node_index = cached
        return cached

    def min_members(self) -> dict[tuple[str, str], int]:
        """`minMember` of every PodGroup that states one, by (namespace, name)."""
        return {
            (o.namespace, o.name): o.min_member
            for o in self.volcano
            if o.kind == "PodGroup" and o.min_member is not None
        }

    def priority_of(self, pod: Pod) -> int:
        if pod.priority or not pod.priority_class:
            return pod.priority
        return self.priority_classes.get(pod.priority_class, 0)


def _volcano(kind: str, raw: Any) -> VolcanoObject:
    metadata = plain(raw.get("metadata")) or {}
    spec = plain(raw.get("spec")) or {}
    status = plain(raw.get("status")) or {}
    state = status.get("state")
    phase = status.get("phase") or (state.get("phase") if isinstance(state, dict) else state)
    queue = spec.get("queue") if isinstance(spec, dict) else None
    min_member = spec.get("minMember") if isinstance(spec, dict) else None
    if isinstance(min_member, bool) or not isinstance(min_member, int) or min_member < 0:
        min_member = None
    return VolcanoObject(
        kind=kind,
        namespace=str(metadata.get("namespace", "")),
        name=str(metadata.get("name", "")),
        phase=phase if isinstance(phase, str) else "",
        queue=queue if isinstance(queue, str) else None,
        min_member=min_member if kind == "PodGroup" else None,
    )


def _priority_class(raw: Any) -> tuple[str, int]:
    name = raw["metadata"]["name"]
    value = raw.get("value") or 0
    if not isinstance(name, str) or isinstance(value, bool) or not isinstance(value, int):
        raise DecodeError(f"priorityclass {name}: expected a name and an integer value")
    return name, value


VOLCANO_APIS = {
    "PodGroup": "/apis/scheduling.volcano.sh/v1beta1/podgroups",
    "Job": "/apis/batch.volcano.sh/v1alpha1/jobs",
    "Queue": "/apis/scheduling.volcano.sh/v1beta1/queues",
}


def take_snapshot(
    kube: KubeClient,
    *,
    log: Log | None = None,
    page: int = 500,
    workers: int = 8,
    watched: WatchedFleet | None = None,
) -> Snapshot:
    """List nodes, accelerator pods, namespaces, PDBs, PriorityClasses, Volcano objects and
    the workload objects above pods (Deployments, StatefulSets, ReplicaSets, Jobs, and the
    operators' JobSets and RayClusters). With `watched` (a long-running process), pods and
    nodes are what its watches keep (observe/watched.py), not listed again."""
    log = log or Log()
    started = time.monotonic()
    missing: list[str] = []

    # Pods and nodes as protobuf: about a third of the API server's CPU of JSON, and a third of
    # this process's (observe/kube.py); the rest has no protobuf (CRDs) or is small.
    def pods_in(namespace: str) -> list[Pod]:
        return kube.list_protobuf(
            f"/api/v1/namespaces/{namespace}/pods",
            PodList,
            accelerator_pod_from_proto,
            accelerator_pod_from_api,
            limit=page,
        )

    def nodes() -> list[Node]:
        return kube.list_protobuf(
            "/api/v1/nodes", NodeList, node_from_proto, node_from_api, limit=page
        )

    def listed(path: str, convert: Callable[[Any], Any]) -> Callable[[], list[Any]]:
        return lambda: kube.list_objects(path, convert, limit=page)

    def volcano() -> list[VolcanoObject]:
        found: list[VolcanoObject] = []
        for kind, path in VOLCANO_APIS.items():
            try:
                found.extend(kube.list_objects(path, partial(_volcano, kind), limit=page))
            except NotFoundError:
                missing.append(path)
        return found

    def priority_classes() -> dict[str, int]:
        return dict(
            kube.list_objects(
                "/apis/scheduling.k8s.io/v1/priorityclasses", _priority_class, limit=page
            )
        )

    def workload_objects() -> list[WorkloadObject]:
        found: list[WorkloadObject] = []
        for kind, (_, _, path) in WORKLOAD_APIS.items():
            found.extend(
                kube.list_objects(path, partial(workload_object_from_api, kind), limit=page)
            )
        found.extend(list_operator_objects(kube, page, missing))
        return found

    def claims() -> list[ClaimObject]:
        found: list[ClaimObject] = []
        for kind, (_, path) in CLAIM_APIS.items():
            try:
                found.extend(kube.list_objects(path, partial(claim_from_api, kind), limit=page))
            except NotFoundError:
                missing.append(path)  # a cluster without DRA
        return found

    jobs: dict[str, Callable[[], Any]] = {
        "nodes": watched.nodes.items if watched else nodes,
        "workload_objects": workload_objects,
        "claims": claims,
        "pdbs": listed("/apis/policy/v1/poddisruptionbudgets", pdb_from_api),
        "priority_classes": priority_classes,
        "volcano": volcano,
    }
    namespaces: list[Namespace] = listed("/api/v1/namespaces", namespace_from_api)()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
        # Pods are listed namespace by namespace, several at once: the API server encodes one
        # list while this process decodes another (about twice as fast as one paginated list
        # of every pod on two cores). A namespace created after the namespace list is seen by
        # the next pass.
        if watched:
            pods = watched.pods.items()
        else:
            per_namespace = list(pool.map(pods_in, [ns.name for ns in namespaces]))
            pods = [pod for found in per_namespace for pod in found]
        results = {name: future.result() for name, future in futures.items()}
    results["namespaces"] = namespaces
    # GPUs held through DRA claims join each pod's demand (observe/dra_claims.py).
    results["pods"] = with_claimed_devices(pods, results["claims"])
    snapshot = Snapshot(
        taken_at=time.time(),
        nodes={node.name: node for node in results["nodes"]},
        pods=results["pods"],
        namespaces={ns.name: ns for ns in results["namespaces"]},
        pdbs=results["pdbs"],
        priority_classes=results["priority_classes"],
        volcano=results["volcano"],
        workload_objects=results["workload_objects"],
        claims=results["claims"],
        missing_apis=missing,
    )
    log.info(
        "observe.snapshot",
        nodes=len(snapshot.nodes),
        accelerator_pods=len(snapshot.pods),
        namespaces=len(snapshot.namespaces),
        pdbs=len(snapshot.pdbs),
        volcano_objects=len(snapshot.volcano),
        workload_objects=len(snapshot.workload_objects),
        missing_apis=missing,
        watched=watched is not None,
        seconds=round(time.monotonic() - started, 3),
    )
    return snapshot
