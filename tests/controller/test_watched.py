"""The pods and nodes the admission keeper keeps by watching (controller/observe/watched.py),
against a real kube-apiserver: the copy holds what a list holds, follows creations and
deletions, is refused while it is not current, and is listed again after its watch fails."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from controller.errors import TemporaryError
from controller.log import Log
from controller.observe.kube import Credentials, KubeClient, pod_path
from controller.observe.model import Pod
from controller.observe.snapshot import take_snapshot
from controller.observe.watched import PODS, Watched, WatchedFleet
from tests.controller.conftest import bare_pod, closed_url, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def watched(client: KubeClient) -> Iterator[WatchedFleet]:
    stop = threading.Event()
    fleet = WatchedFleet.start(client, log=Log(), stop=stop)
    try:
        yield fleet
    finally:
        stop.set()


def uids(pods: list[Pod]) -> set[str]:
    return {pod.uid for pod in pods}


def test_a_snapshot_from_the_watched_copy_is_the_listed_one(
    client: KubeClient, namespace: str, watched: WatchedFleet
) -> None:
    for name in ("a", "b"):
        client.create(pod_path(namespace), bare_pod(name, "training", gpus=1))
    wait_for(lambda: len([p for p in watched.pods.items() if p.namespace == namespace]) == 2)

    def ours(pods: list[Pod]) -> dict[str, Pod]:
        # the cluster is shared: other tests' pods may go between the list and the watch event
        return {p.uid: p for p in pods if p.namespace == namespace}

    listed = take_snapshot(client)
    kept = take_snapshot(client, watched=watched)
    assert len(ours(kept.pods)) == 2
    assert ours(kept.pods) == ours(listed.pods)
    assert kept.nodes, "the local cluster's fake GPU nodes"
    # the nodes as listed, once the watch has what the list has (a node may change between)
    wait_for(lambda: take_snapshot(client, watched=watched).nodes == take_snapshot(client).nodes)


def test_the_copy_follows_creations_and_deletions_and_counts_them(
    client: KubeClient, namespace: str, watched: WatchedFleet
) -> None:
    """What the keeper wakes on. The cluster is shared (other tests' pods come and go), so this
    reads what the copy holds and how many changes it counted, not which change came last."""
    seen = watched.pods.changes
    cpu = client.create(pod_path(namespace), bare_pod("cpu", "training", gpus=0))
    gpu = client.create(pod_path(namespace), bare_pod("w", "training", gpus=1))
    # a watch's events come in order: once the second pod is kept, the first was seen
    wait_for(lambda: gpu["metadata"]["uid"] in uids(watched.pods.items()))
    # a pod without accelerators is not kept, but its creation is a change (the keeper wakes)
    assert cpu["metadata"]["uid"] not in uids(watched.pods.items())
    assert watched.pods.changes >= seen + 2
    client.delete(pod_path(namespace, "w"), {"gracePeriodSeconds": 0})
    wait_for(lambda: gpu["metadata"]["uid"] not in uids(watched.pods.items()))
    assert watched.pods.lists == 1, "followed by the watch, not listed again"


def test_a_copy_that_cannot_be_listed_is_refused_naming_why(client: KubeClient) -> None:
    """No evidence, no action: a snapshot taken through a copy that is not current fails as a
    failed list does, though the API server answers the snapshot's other lists."""
    nowhere = KubeClient(Credentials(server=closed_url()), timeout=2)
    stop = threading.Event()
    try:
        fleet = WatchedFleet.start(nowhere, log=Log(), stop=stop)
        with pytest.raises(TemporaryError, match=r"not current: .*cannot connect"):
            fleet.pods.items()
        with pytest.raises(TemporaryError, match=r"/api/v1/.*: the watched copy is not current"):
            take_snapshot(client, watched=fleet)
        assert "cannot connect" in (fleet.problem() or "")
    finally:
        stop.set()


def test_a_broken_watch_is_listed_again_and_counted_as_a_change(client: KubeClient) -> None:
    """A watch the API server refuses (here: a version it cannot parse) makes the copy not
    current until a list again succeeds, and that list is a change: what the copy missed is
    not known, so the keeper passes again."""
    pods = Watched(client, PODS, log=Log())
    pods._list()
    assert (pods.lists, pods.changes) == (1, 0)
    pods._list()  # a list after the first is a change (no watch runs yet: nothing else is)
    assert pods.changes == 1 and pods.last_change == "/api/v1/pods listed again"
    pods._version = "not-a-version"
    stop = threading.Event()
    threading.Thread(target=pods.keep, args=(stop,), daemon=True).start()
    try:
        reason = pods.wait_for_change(1, time.monotonic() + 30, stop)
        # kube-apiserver v1.36 answers this one 500, not 400 (its storage error is no Status)
        assert reason is not None and 'resourceVersion: Invalid value: "not-a-version"' in reason
        wait_for(lambda: pods.lists == 3, timeout=30)
        assert pods.problem() is None
        assert pods.changes >= 2  # that list too (other tests' pods may change meanwhile)
        assert pods.items() == list(pods._items.values())
    finally:
        stop.set()
