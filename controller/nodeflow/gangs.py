"""The gangs a drain must keep whole: Volcano runs a gang's pods together or not at all, so a
workflow that evicts one member stops all of it. Gangs are namespaced (a PodGroup and its pods
share a namespace), so the members are found with one list per namespace that holds one."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from controller.nodeflow.pods import PodView
from controller.observe.kube import KubeClient, pod_path

GangKey = tuple[str, str]
"""(namespace, PodGroup)."""


def in_play(pod: PodView) -> bool:
    """Neither finished nor being deleted."""
    return pod.active and not pod.deleting


def gang_members(
    kube: KubeClient,
    namespaces: Iterable[str],
    view: Callable[[dict[str, Any]], PodView],
    *,
    workers: int = 8,
) -> dict[GangKey, list[PodView]]:
    """Every pod in play of every gang in `namespaces`, by gang, in the order listed."""
    wanted = sorted(set(namespaces))

    def pods_in(namespace: str) -> list[PodView]:
        return [view(raw) for raw in kube.list(pod_path(namespace))]

    members: dict[GangKey, list[PodView]] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(wanted)))) as pool:
        for found in pool.map(pods_in, wanted):
            for pod in found:
                if pod.gang and in_play(pod):
                    members.setdefault((pod.namespace, pod.gang), []).append(pod)
    return members
