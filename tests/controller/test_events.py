"""Events against the real API server: the same Event again raises the count of the one there
(as client-go's recorder aggregates), and anything that tells two Events apart keeps them
apart."""

from __future__ import annotations

import pytest

from controller.act.events import EventRecorder, ObjectRef
from controller.observe.kube import KubeClient

pytestmark = pytest.mark.integration


def test_a_repeated_event_is_counted_on_one_event(client: KubeClient, namespace: str) -> None:
    recorder = EventRecorder(client, dry_run=False)
    gang = ObjectRef(
        api_version="scheduling.volcano.sh/v1beta1",
        kind="PodGroup",
        namespace=namespace,
        name="trainer",
        uid="uid-1",
    )
    for _ in range(3):
        recorder.emit(gang, "GangPreemptionWaits", "no node set frees 16 GPUs", warning=True)
    recorder.emit(gang, "GangPreemptionWaits", "no node set frees 8 GPUs", warning=True)
    recreated = ObjectRef(
        api_version=gang.api_version,
        kind=gang.kind,
        namespace=namespace,
        name="trainer",
        uid="uid-2",
    )
    recorder.emit(recreated, "GangPreemptionWaits", "no node set frees 16 GPUs", warning=True)

    events = client.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    said = sorted((e["message"], e["involvedObject"]["uid"], e["count"], e["type"]) for e in events)
    assert said == [
        ("no node set frees 16 GPUs", "uid-1", 3, "Warning"),
        ("no node set frees 16 GPUs", "uid-2", 1, "Warning"),
        ("no node set frees 8 GPUs", "uid-1", 1, "Warning"),
    ]
    assert recorder.recorded == 5
    (counted,) = [e for e in events if e["count"] == 3]
    assert counted["lastTimestamp"] >= counted["firstTimestamp"]


def test_a_dry_run_writes_no_event(client: KubeClient, namespace: str) -> None:
    recorder = EventRecorder(client, dry_run=True)
    recorder.emit(
        ObjectRef(api_version="v1", kind="Pod", namespace=namespace, name="p"), "Reclaimed", "why"
    )
    assert client.get(f"/api/v1/namespaces/{namespace}/events")["items"] == []
