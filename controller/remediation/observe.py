"""The read-only snapshot one health pass decides on: the pools' nodes, the pods that matter
(those on nodes whose state needs them, and the other members of their gangs), and the DCGM
signals of every GPU.

Nodes come from one list (every node with `fleetplane.dev/pool`); pods one field-selected list
per node that needs them, plus one list per namespace holding a gang member (gangs are
namespaced: a Volcano PodGroup and its pods share a namespace). Signals are read for the whole
fleet in one set of queries, and read again over a shorter window for nodes that came back into
service inside the window, so a node is never judged on the fault it was remediated for.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from controller.errors import ControllerError
from controller.log import Log
from controller.nodeflow.gangs import gang_members, in_play
from controller.nodeflow.nodes import NodeView, node_view
from controller.nodeflow.pods import PodView, pod_view
from controller.nodeflow.state import read_since
from controller.observe.kube import KubeClient
from controller.observe.metrics import Prometheus
from controller.observe.model import pod_from_api
from controller.remediation import states
from controller.remediation.settings import HealthSettings
from controller.remediation.signals import NodeSignals, Windows, read_signals
from controller.remediation.states import Detail
from fleet import labels as keys


@dataclass(frozen=True, kw_only=True)
class HealthNode:
    """A node as the health machine sees it: the shared node view (labels, cordon, taints,
    capacity, driver) and the health state."""

    view: NodeView
    state: str | None
    since: float | None
    detail: Detail
    conditions: tuple[dict[str, Any], ...] = ()
    boot_id: str | None = None
    """`status.nodeInfo.bootID`: changes when the node reboots."""

    @property
    def name(self) -> str:
        return self.view.name

    @property
    def pool(self) -> str:
        return self.view.pool

    @property
    def tainted(self) -> bool:
        return any(t.get("key") == states.TAINT_KEY for t in self.view.taints)

    def condition(self, kind: str) -> dict[str, Any] | None:
        return next((c for c in self.conditions if c.get("type") == kind), None)


def health_node(raw: dict[str, Any]) -> HealthNode:
    view = node_view(raw)
    return HealthNode(
        view=view,
        state=view.labels.get(states.STATE_LABEL),
        since=read_since(view.annotations, states.SINCE_ANNOTATION),
        detail=Detail.decode(view.annotations.get(states.DETAIL_ANNOTATION)),
        conditions=tuple((raw.get("status") or {}).get("conditions") or ()),
        boot_id=((raw.get("status") or {}).get("nodeInfo") or {}).get("bootID") or None,
    )


def work_pod(raw: dict[str, Any], settings: HealthSettings) -> PodView:
    """The pod view with what an eviction costs (GPUs held, start), read by the shared decoder
    of `controller.observe.model` (a malformed pod is an error, as for every other pass)."""
    shared = settings.workflow
    slim = pod_from_api(raw)
    view = pod_view(
        raw, driver_namespace=shared.driver_namespace, driver_selector=shared.driver_selector
    )
    return replace(view, devices=slim.devices, started=slim.started)


@dataclass(kw_only=True)
class HealthSnapshot:
    taken_at: float
    nodes: list[HealthNode]
    pods: dict[str, list[PodView]] = field(default_factory=dict)
    """Pods per node, for nodes whose state needs them."""
    gangs: dict[tuple[str, str], list[PodView]] = field(default_factory=dict)
    """(namespace, gang) -> every pod of the gang, wherever it runs."""
    signals: dict[str, NodeSignals] = field(default_factory=dict)
    signals_error: str | None = None
    """Why no signals could be read (Prometheus down, a rejected query): nothing is known."""

    def pods_on(self, node: str) -> list[PodView]:
        return self.pods.get(node, [])


def windows(settings: HealthSettings) -> Windows:
    return Windows(
        signal=settings.signal_window_seconds,
        hot_for=settings.hot_for_seconds,
        stale_after=settings.stale_after_seconds,
        step=settings.scrape_interval_seconds,
    )


def take_health_snapshot(
    kube: KubeClient,
    prom: Prometheus | None,
    settings: HealthSettings,
    *,
    now: float,
    log: Log | None = None,
    workers: int = 8,
) -> HealthSnapshot:
    log = log or Log()
    started = time.monotonic()
    nodes = [
        health_node(raw) for raw in kube.list("/api/v1/nodes", params={"labelSelector": keys.POOL})
    ]
    wanted = [n.name for n in nodes if n.state in states.NEEDS_PODS]

    def pods_of(name: str) -> list[PodView]:
        items = kube.list("/api/v1/pods", params={"fieldSelector": f"spec.nodeName={name}"})
        return [work_pod(raw, settings) for raw in items]

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(wanted) or 1))) as pool:
        pods = dict(zip(wanted, pool.map(pods_of, wanted), strict=True))
    snapshot = HealthSnapshot(taken_at=now, nodes=nodes, pods=pods)
    gang_namespaces = {p.namespace for on in pods.values() for p in on if p.gang and in_play(p)}
    snapshot.gangs = gang_members(
        kube, gang_namespaces, lambda raw: work_pod(raw, settings), workers=workers
    )
    if prom is not None:
        try:
            snapshot.signals = read_signals(prom, now, windows(settings))
            recent = {
                n.name: n.detail.history[-1].get("returned")
                for n in nodes
                if n.state is None and n.detail.history and n.detail.history[-1].get("returned")
            }
            for name, returned in recent.items():
                age = int(now - float(returned or 0))
                if age >= settings.signal_window_seconds:
                    continue
                narrow = Windows(
                    signal=max(age, settings.scrape_interval_seconds),
                    hot_for=min(settings.hot_for_seconds, max(age, 1)),
                    stale_after=settings.stale_after_seconds,
                    step=settings.scrape_interval_seconds,
                )
                again = read_signals(prom, now, narrow, [name])
                snapshot.signals[name] = again.get(name, NodeSignals(hostname=name))
        except ControllerError as error:
            snapshot.signals = {}
            snapshot.signals_error = str(error)
            log.error("health.signals.failed", error=str(error), kind=type(error).__name__)
    log.info(
        "health.observe",
        nodes=len(nodes),
        nodes_with_pods=len(pods),
        gangs=len(snapshot.gangs),
        gpus_with_signals=sum(len(s.gpus) for s in snapshot.signals.values()),
        seconds=round(time.monotonic() - started, 3),
    )
    return snapshot
