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

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from controller.log import Log
from controller.nodeflow import nodes as base
from controller.nodeflow.gangs import gang_members
from controller.nodeflow.keys import GANG_ANNOTATION as GANG_ANNOTATION
from controller.nodeflow.nodes import driver_version as driver_version
from controller.nodeflow.pods import PodView as PodView
from controller.nodeflow.pods import Terminated as Terminated
from controller.nodeflow.pods import checkpoint_at as checkpoint_at
from controller.nodeflow.pods import checkpoint_problem as checkpoint_problem
from controller.nodeflow.pods import pdb_blocking as pdb_blocking
from controller.nodeflow.pods import pod_view as base_pod_view
from controller.nodeflow.state import read_since
from controller.observe.kube import KubeClient
from controller.observe.model import DisruptionBudget, pdb_from_api
from controller.upgrade import states
from controller.upgrade.limits import in_any_window
from controller.upgrade.settings import UpgradeSettings
from controller.upgrade.states import Detail
from fleet import labels as keys


@dataclass(frozen=True, kw_only=True)
class NodeView(base.NodeView):
    """A node with its upgrade state, timer and detail."""

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


def node_view(raw: dict[str, Any]) -> NodeView:
    fields = base.node_fields(raw)
    labels, annotations = fields["labels"], fields["annotations"]
    return NodeView(
        **fields,
        state=labels.get(states.STATE_LABEL),
        since=read_since(annotations, states.SINCE_ANNOTATION),
        detail=Detail.decode(annotations.get(states.DETAIL_ANNOTATION)),
    )


def pod_view(raw: dict[str, Any], settings: UpgradeSettings) -> PodView:
    return base_pod_view(
        raw, driver_namespace=settings.driver_namespace, driver_selector=settings.driver_selector
    )


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
    gang_namespaces = {
        p.namespace for on_node in pods.values() for p in on_node if p.gang and p.active
    }
    members = gang_members(
        kube, gang_namespaces, lambda raw: pod_view(raw, settings), workers=workers
    )
    gang_nodes = {key: frozenset(m.node for m in gang if m.node) for key, gang in members.items()}
    snapshot = UpgradeSnapshot(
        taken_at=time.time(),
        nodes=nodes,
        pods=pods,
        pdbs=pdbs,
        gang_nodes={key: on for key, on in gang_nodes.items() if on},
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
