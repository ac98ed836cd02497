"""Opening a burst tier while Volcano writes the team's Queue (the real API server, the pinned
Volcano release's Queue CRD, the project's burst policy on a real OPA).

Volcano's controllers write a Queue's status as its pods come and go (`/status`), and every such
write bumps the Queue's resourceVersion: the tier's opening, a merge patch on the version read,
then meets a 409. The local stack's CI hit it the pass after a preemption had changed the team's
pods (the pass exited 1). A status write says nothing about the tier, so the opening is read
again and written; a tier changed since the plan (another writer opened one) is left alone and
the next pass decides."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest

from controller.decide.burst import BURST_TIER
from controller.observe.kube import KubeClient
from localfleet.controlplane import LocalCluster
from tests.conftest import OpaServer
from tests.controller.conftest import Harness, config_for, wait_for
from tests.controller.race_kit import WrittenAfterRead

pytestmark = pytest.mark.integration

QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"


def merged(client: KubeClient, path: str, change: dict[str, Any]) -> Callable[[], Any]:
    """Another writer's change of `path`: `status` (its subresource) as Volcano writes a
    Queue's and the scheduler a waiting pod's, or `annotations` as another opener would."""
    return lambda: client.merge_patch(f"{path}/status" if "status" in change else path, change)


@pytest.fixture
def writer(kube: LocalCluster) -> Iterator[WrittenAfterRead]:
    found = KubeClient.from_kubeconfig(str(kube.kubeconfig))
    try:
        yield WrittenAfterRead(found, {})
    finally:
        found.close()


def waiting_pod(namespace: str) -> dict[str, Any]:
    """An 8-GPU training pod the scheduler cannot place (no node has its GPU product), not
    pinned to a pool (a pool is a fixed choice, which bursting leaves alone)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "waits",
            "namespace": namespace,
            "labels": {"fleetplane.dev/workload-type": "training"},
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"limits": {"nvidia.com/gpu": "8"}},
                }
            ],
            "nodeSelector": {"nvidia.com/gpu.product": "no-such-gpu"},
            "terminationGracePeriodSeconds": 0,
        },
    }


def setup(
    kube: LocalCluster, namespace: str, opa: OpaServer, writer: WrittenAfterRead
) -> tuple[Harness, str]:
    queue = f"race-{uuid.uuid4().hex[:8]}"
    kube.apply(
        [
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": queue},
                "spec": {"weight": 1, "reclaimable": False},
            }
        ]
    )
    document = config_for(namespace)
    document["teams"]["research"]["queue"] = queue
    base = document["pools"]["h100-ondemand"]
    document["pools"]["race-reserved"] = {**base, "teams": ["research"]}
    document["reserved_pools"] = {"race-reserved": ["research"]}
    month = dt.datetime.now(dt.UTC).strftime("%Y-%m")
    opa.put_data("fleetplane/config", document)
    opa.put_data("fleetplane/spend", {"research": {"month": month, "usd": 0}})
    opa.put_data("fleetplane/reservations", {})
    h = Harness(
        kube=kube, namespace=namespace, opa=opa, document=document, client=cast(KubeClient, writer)
    )
    h.create(waiting_pod(namespace))
    wait_for(
        lambda: any(
            c.get("reason") == "Unschedulable"
            for c in h.pod("waits").get("status", {}).get("conditions") or []
        ),
        timeout=60,
    )
    return h, queue


def logged(run: Any, event: str) -> list[dict[str, Any]]:
    return [line for line in run.logs if line["event"] == event]


def test_volcanos_status_write_between_read_and_write_does_not_fail_the_opening(
    kube: LocalCluster, namespace: str, opa_server: OpaServer, writer: WrittenAfterRead
) -> None:
    h, queue = setup(kube, namespace, opa_server, writer)
    pod = f"/api/v1/namespaces/{namespace}/pods/waits"
    writer.writes = {
        f"{QUEUES}/{queue}": merged(writer.client, f"{QUEUES}/{queue}", {"status": {"pending": 1}}),
        pod: merged(
            writer.client, pod, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
        ),
    }
    run = h.run(time.time() + 120, concerns=("burst",))
    assert writer.writes == {}  # both written between the controller's read and its write
    assert run.summary.errors == 0, logged(run, "burst.open.failed")
    (opened,) = logged(run, "burst.open")
    assert opened["target"] == f"queue {queue}" and opened["tier"] == "on-demand"
    found = writer.get(f"{QUEUES}/{queue}")
    assert found["metadata"]["annotations"][BURST_TIER] == "on-demand"
    assert found["status"]["pending"] == 1
    (admitted,) = logged(run, "burst.admit")
    assert admitted["target"] == f"{namespace}/waits"
    assert {
        "key": BURST_TIER,
        "operator": "Equal",
        "value": "on-demand",
        "effect": "NoSchedule",
    } in (h.pod("waits")["spec"]["tolerations"])


def test_a_tier_changed_since_the_plan_is_left_to_the_next_pass(
    kube: LocalCluster, namespace: str, opa_server: OpaServer, writer: WrittenAfterRead
) -> None:
    h, queue = setup(kube, namespace, opa_server, writer)
    # another opener (an operator by hand, a second controller) opened spot meanwhile
    path = f"{QUEUES}/{queue}"
    writer.writes = {
        path: merged(writer.client, path, {"metadata": {"annotations": {BURST_TIER: "spot"}}})
    }
    run = h.run(time.time() + 120, concerns=("burst",))
    assert writer.writes == {}
    assert run.summary.errors == 0
    assert not logged(run, "burst.open")
    (raced,) = logged(run, "burst.open.raced")
    assert raced["queue"] == queue and "no longer reserved" in raced["reason"]
    found = writer.get(f"{QUEUES}/{queue}")
    assert found["metadata"]["annotations"][BURST_TIER] == "spot"  # theirs, not overwritten
    assert not logged(run, "burst.admit")
