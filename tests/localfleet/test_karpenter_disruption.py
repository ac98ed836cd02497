"""One coordinator for every disruption, held against the real Karpenter (issue 34 item 5):
the pinned Karpenter-kwok beside the session's API server and kwok, its NodePools from the
fleet configuration with a 5 s consolidateAfter. The product keeps Karpenter off through
Karpenter's own contract, `karpenter.sh/do-not-disrupt`, and keeps itself off a node Karpenter
has begun to take away."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from controller.errors import ConflictError, NotFoundError
from controller.nodeflow import lock
from controller.observe.kube import KubeClient
from localfleet.controlplane import LocalCluster
from localfleet.karpenter import LocalKarpenter
from tests.conftest import OpaServer
from tests.controller.conftest import Harness, config_for
from tests.controller.nodeflow.test_lock import runtime
from tests.localfleet.karpenter_kit import ON_DEMAND, gang, karpenter_nodes, running_on
from tests.localfleet.test_volcano import container, wait_for

pytestmark = pytest.mark.integration

HELD_FOR = 40.0
"""How long a held, empty node must outlive Karpenter's consolidateAfter (5 s) to count as
kept: eight times it, and several of Karpenter's disruption polls."""


@pytest.fixture
def client(kube: LocalCluster) -> Iterator[KubeClient]:
    found = KubeClient.from_kubeconfig(str(kube.kubeconfig))
    try:
        yield found
    finally:
        found.close()


def node_of_one_pod(kube: LocalCluster, namespace: str, job: str) -> str:
    """A Karpenter node brought by one 8-GPU pod of the on-demand pool, running it."""
    kube.apply(gang(namespace, job, 1, ON_DEMAND, spot=False))
    nodes = wait_for(f"{job} running", lambda: running_on(kube, namespace, job, 1), 180)
    return str(nodes[0])


def remove_pods(kube: LocalCluster, namespace: str, job: str) -> None:
    kube.kubectl("delete", "pods", "-n", namespace, "-l", f"job={job}", "--wait=true")


def node_or_none(client: KubeClient, name: str) -> dict[str, Any] | None:
    try:
        return client.get(f"/api/v1/nodes/{name}")
    except NotFoundError:
        return None


def test_a_node_held_by_the_upgrade_is_not_consolidated_until_released(
    kube: LocalCluster, karpenter: LocalKarpenter, namespace: str, client: KubeClient
) -> None:
    name = node_of_one_pod(kube, namespace, "held")
    rt = runtime(client, time.time())
    assert lock.take(rt, "upgrade", name, lock.UPGRADE) is None
    assert client.get(f"/api/v1/nodes/{name}")["metadata"]["annotations"][lock.DO_NOT_DISRUPT] == (
        "true"
    )

    # Empty now: unheld, Karpenter would remove it 5 s later. Held, it stays, untainted.
    remove_pods(kube, namespace, "held")
    deadline = time.monotonic() + HELD_FOR
    while time.monotonic() < deadline:
        node = node_or_none(client, name)
        assert node is not None, "Karpenter removed a node the upgrade holds"
        assert lock.karpenter_disrupting(node) is None
        assert lock.claim_deleting(rt, node) is None
        time.sleep(1)

    # Released: the lock's do-not-disrupt goes with it, and Karpenter consolidates the node.
    lock.release(rt, "upgrade", name, lock.UPGRADE)
    assert lock.DO_NOT_DISRUPT not in (
        client.get(f"/api/v1/nodes/{name}")["metadata"].get("annotations") or {}
    )
    wait_for("the released node consolidated", lambda: node_or_none(client, name) is None, 180)
    assert not karpenter_nodes(kube)


KEEP = "test.fleetplane.dev/keep-while-watched"
"""The test's own finalizer on the node: Karpenter-kwok can taint, drain and delete an empty
node within one poll (seen under load in CI), so the node object stays, marked as being
deleted, until the test has seen the mark and tried the lock."""


def set_keep(client: KubeClient, name: str, keep: bool) -> None:
    """Add or drop the test's finalizer, leaving Karpenter's own (resourceVersion-guarded)."""
    while True:
        node = node_or_none(client, name)
        if node is None:
            return
        metadata = node["metadata"]
        others = [f for f in metadata.get("finalizers") or () if f != KEEP]
        try:
            client.merge_patch(
                f"/api/v1/nodes/{name}",
                {
                    "metadata": {
                        "resourceVersion": metadata["resourceVersion"],
                        "finalizers": [*others, KEEP] if keep else others,
                    }
                },
            )
            return
        except ConflictError:
            continue


def test_a_node_karpenter_is_disrupting_is_not_taken_by_the_lock(
    kube: LocalCluster, karpenter: LocalKarpenter, namespace: str, client: KubeClient
) -> None:
    name = node_of_one_pod(kube, namespace, "going")
    set_keep(client, name, True)
    try:
        remove_pods(kube, namespace, "going")

        # Watch the empty node until Karpenter marks it (its taint, or the node's deletion).
        marked: dict[str, Any] | None = None
        deadline = time.monotonic() + 120
        while marked is None and time.monotonic() < deadline:
            node = node_or_none(client, name)
            assert node is not None, "the node went despite the test's finalizer"
            if lock.karpenter_disrupting(node) is not None:
                marked = node
            time.sleep(0.1)
        assert marked is not None, "Karpenter never began to disrupt the empty node"

        why = lock.take(runtime(client, time.time()), "upgrade", name, lock.UPGRADE)
        assert why is not None
        assert "Karpenter" in why or "deleted" in why or "gone" in why
        after = node_or_none(client, name)
        if after is not None:
            assert lock.HOLDER not in (after["metadata"].get("annotations") or {})
    finally:
        set_keep(client, name, False)
    wait_for("the disrupted node removed", lambda: node_or_none(client, name) is None, 180)


KARPENTER_POD = "karpenter.sh/do-not-disrupt"
CHECKPOINT = "fleetplane.dev/last-checkpoint"
GANG = "scheduling.k8s.io/group-name"


def half_node(
    name: str, *, gang_name: str | None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """A Deployment of one 4-GPU training pod on the on-demand pool (half a node); `gang_name`
    makes it a gang member with a checkpoint location."""
    spec = gang("unused", name, 1, ON_DEMAND, spot=False)[0]["spec"]
    spec["containers"] = [container(4)]
    annotations = dict(annotations or {})
    if gang_name:
        annotations |= {
            GANG: gang_name,
            "fleetplane.dev/checkpoint-location": f"s3://checkpoints/{gang_name}",
        }
    labels = {"job": name, "fleetplane.dev/workload-type": "training"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"job": name}},
            "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": spec},
        },
    }


def both_running(kube: LocalCluster, namespace: str) -> tuple[list[str], list[str]] | None:
    member = running_on(kube, namespace, "member", 1)
    other = running_on(kube, namespace, "other", 1)
    return (member, other) if member and other else None


def started(pod: dict[str, Any]) -> float:
    from datetime import datetime

    return datetime.fromisoformat(pod["status"]["startTime"].replace("Z", "+00:00")).timestamp()


def test_a_node_holding_an_uncheckpointed_gang_member_waits_for_its_checkpoint(
    kube: LocalCluster,
    karpenter: LocalKarpenter,
    namespace: str,
    client: KubeClient,
    opa_server: OpaServer,
) -> None:
    """Two half-used nodes whose pods fit on one: Karpenter wants to remove the gang member's
    node (the other pod is the user's own do-not-disrupt). The disruption concern's pass (real OPA, the
    project's policies) protects the uncheckpointed member; Karpenter leaves its node well past
    consolidateAfter; the gang checkpoints, the next pass clears the annotation, the node goes."""
    document = config_for(namespace)
    opa_server.put_data("fleetplane/config", document)
    opa_server.put_data("fleetplane/spend", {})
    h = Harness(kube=kube, namespace=namespace, opa=opa_server, document=document, client=client)

    h.create(half_node("member", gang_name="train-gang"))
    first = wait_for(
        "the gang member running", lambda: running_on(kube, namespace, "member", 1), 180
    )[0]
    (pod,) = h.pods("job=member")
    now = started(pod) + 7200
    assert h.run(now, concerns=("disruption",)).actions("disruption.protect") == 1
    assert h.pods("job=member")[0]["metadata"]["annotations"][KARPENTER_POD] == "true"

    # A second half-used node: a blocker fills the first node, so the other pod brings a new
    # one; the blocker goes. The other pod carries a user's own do-not-disrupt, so the first
    # node is the one Karpenter would empty (its member fits beside the other pod).
    h.create(half_node("blocker", gang_name=None))
    assert wait_for("the blocker running", lambda: running_on(kube, namespace, "blocker", 1)) == [
        first
    ]
    h.create(half_node("other", gang_name=None, annotations={KARPENTER_POD: "true"}))
    second = wait_for(
        "the other pod running", lambda: running_on(kube, namespace, "other", 1), 180
    )[0]
    assert second != first
    kube.kubectl("delete", "deployment", "blocker", "-n", namespace, "--wait=false")
    wait_for("the blocker gone", lambda: not h.pods("job=blocker"), 60)

    deadline = time.monotonic() + HELD_FOR
    while time.monotonic() < deadline:
        node = node_or_none(client, first)
        assert node is not None, "Karpenter removed the node of an uncheckpointed gang member"
        assert lock.karpenter_disrupting(node) is None
        time.sleep(1)
    assert running_on(kube, namespace, "member", 1) == [first]

    # The gang checkpoints: the next pass clears the protection, and Karpenter consolidates.
    h.client.merge_patch(
        f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}",
        {"metadata": {"annotations": {CHECKPOINT: str(int(now + 50))}}},
    )
    assert h.run(now + 90, concerns=("disruption",)).actions("disruption.unprotect") == 1
    wait_for("the member's node consolidated", lambda: node_or_none(client, first) is None, 180)
    # Karpenter may delete the first node alone or replace both by one: either way the two
    # halves end on one node, not the first.
    member, other = wait_for(
        "both pods running again",
        lambda: both_running(kube, namespace),
        180,
    )
    assert member == other and first not in member
    kube.kubectl("delete", "deployments", "--all", "-n", namespace, "--wait=false")
    wait_for("Karpenter's empty nodes removed", lambda: not karpenter_nodes(kube), 180)
