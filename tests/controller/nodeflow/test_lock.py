"""One disruptive actor per node (controller.nodeflow.lock), against the session's real API
server: a node of the test's own, Karpenter's disruption simulated the way Karpenter marks it
(its `karpenter.sh/disrupted:NoSchedule` taint), races made real by two clients writing the
same node with the resourceVersion each read."""

from __future__ import annotations

import contextlib
import io
import threading
import uuid
from collections.abc import Iterator
from typing import Any, cast

import pytest

from controller.act.opa import Opa
from controller.act.runtime import Runtime
from controller.config import Settings
from controller.errors import NotFoundError
from controller.log import Log
from controller.nodeflow import lock
from controller.observe.kube import KubeClient
from controller.summary import Summary
from tests.controller.builders import NOW, fleet
from tests.controller.conftest import closed_url
from tests.controller.race_kit import WrittenAfterRead

pytestmark = pytest.mark.integration

DISRUPTED = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}


def node_path(name: str) -> str:
    return f"/api/v1/nodes/{name}"


@pytest.fixture
def node(client: KubeClient) -> Iterator[str]:
    """A Node object of this test's own (no kubelet behind it: only its metadata matters)."""
    name = f"lock-{uuid.uuid4().hex[:8]}"
    client.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    try:
        yield name
    finally:
        with contextlib.suppress(NotFoundError):
            client.delete(node_path(name))


def runtime(kube: Any, now: float = NOW, *, dry_run: bool = False) -> Runtime:
    settings = Settings(prometheus_url=closed_url(), opa_url=closed_url(), dry_run=dry_run)
    return Runtime(
        kube=cast(KubeClient, kube),
        opa=Opa(settings.opa_url),
        fleet=fleet(),
        settings=settings,
        now=now,
        summary=Summary(dry_run=dry_run),
        log=Log(),
        out=io.StringIO(),
    )


def annotations(client: KubeClient, name: str) -> dict[str, str]:
    return client.get(node_path(name))["metadata"].get("annotations") or {}


def karpenter_disrupts(client: KubeClient, name: str) -> None:
    """What Karpenter does first when it disrupts a node (consolidation, drift, expiry)."""
    client.merge_patch(node_path(name), {"spec": {"taints": [DISRUPTED]}})


def test_a_held_node_carries_karpenters_do_not_disrupt_until_released(
    client: KubeClient, node: str
) -> None:
    rt = runtime(client)
    assert lock.take(rt, "upgrade", node, lock.UPGRADE) is None
    found = annotations(client, node)
    assert found[lock.HOLDER] == "upgrade"
    assert found[lock.HELD_SINCE] == str(int(NOW))
    assert found[lock.DO_NOT_DISRUPT] == "true"
    assert found[lock.NODE_PROTECTED_BY] == "lock"
    assert lock.take(rt, "upgrade", node, lock.UPGRADE) is None  # held already: no-op
    lock.release(rt, "upgrade", node, lock.UPGRADE)
    found = annotations(client, node)
    for key in (lock.HOLDER, lock.HELD_SINCE, lock.DO_NOT_DISRUPT, lock.NODE_PROTECTED_BY):
        assert key not in found


def test_a_do_not_disrupt_set_by_someone_else_outlives_the_lock(
    client: KubeClient, node: str
) -> None:
    client.merge_patch(
        node_path(node), {"metadata": {"annotations": {lock.DO_NOT_DISRUPT: "true"}}}
    )
    rt = runtime(client)
    assert lock.take(rt, "health", node, lock.REMEDIATION) is None
    assert lock.NODE_PROTECTED_BY not in annotations(client, node)
    lock.release(rt, "health", node, lock.REMEDIATION)
    found = annotations(client, node)
    assert found[lock.DO_NOT_DISRUPT] == "true"
    assert lock.HOLDER not in found


def test_a_node_karpenter_disrupts_is_taken_by_no_actor(client: KubeClient, node: str) -> None:
    karpenter_disrupts(client, node)
    rt = runtime(client)
    for actor in (lock.REMEDIATION, lock.UPGRADE, lock.PREEMPTION):
        why = lock.take(rt, actor, node, actor)
        assert why is not None and "Karpenter is disrupting it" in why
    assert lock.HOLDER not in annotations(client, node)
    assert rt.summary.get("actions", action="hold-node", concern="upgrade", outcome="refused") == 1


def test_an_upgrade_loses_the_race_to_a_consolidation_that_tainted_first(
    client: KubeClient, node: str
) -> None:
    # Karpenter taints the node after the actor's read, before its write
    racing = WrittenAfterRead(client, {node_path(node): lambda: karpenter_disrupts(client, node)})
    rt = runtime(racing)
    why = lock.take(rt, "upgrade", node, lock.UPGRADE)
    assert not racing.writes  # Karpenter struck
    assert why is not None and "Karpenter is disrupting it" in why
    found = annotations(client, node)
    assert lock.HOLDER not in found and lock.DO_NOT_DISRUPT not in found


def test_a_node_held_by_an_upgrade_tells_karpenter_not_to_disrupt_it(
    client: KubeClient, node: str
) -> None:
    """Karpenter does not start a voluntary disruption of a node annotated
    karpenter.sh/do-not-disrupt=true; the lock sets it in the same write that takes the node,
    so there is no moment where the upgrade holds the node and Karpenter may take it."""
    rt = runtime(client)
    assert lock.take(rt, "upgrade", node, lock.UPGRADE) is None
    written = client.get(node_path(node))
    assert written["metadata"]["annotations"][lock.DO_NOT_DISRUPT] == "true"
    assert written["metadata"]["annotations"][lock.HOLDER] == "upgrade"


def test_two_product_actors_racing_for_a_node_never_both_hold_it(kube: Any, node: str) -> None:
    """Both read the node before either writes (a barrier): one write wins, the other
    conflicts, reads the node again and finds it held."""
    barrier = threading.Barrier(2, timeout=30)
    clients = [KubeClient.from_kubeconfig(str(kube.kubeconfig)) for _ in range(2)]

    class Together:
        def __init__(self, client: KubeClient) -> None:
            self.client, self.first = client, True

        def get(self, path: str) -> dict[str, Any]:
            found = self.client.get(path)
            if self.first:
                self.first = False
                barrier.wait()
            return found

        def __getattr__(self, name: str) -> Any:
            return getattr(self.client, name)

    answers: dict[str, str | None] = {}

    def contend(actor: str, client: KubeClient) -> None:
        answers[actor] = lock.take(runtime(Together(client)), actor, node, actor)

    threads = [
        threading.Thread(target=contend, args=(actor, client))
        for actor, client in zip((lock.UPGRADE, lock.REMEDIATION), clients, strict=True)
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        for client in clients:
            client.close()
    winners = [actor for actor, why in answers.items() if why is None]
    assert len(answers) == 2 and len(winners) == 1, answers
    [loser] = [actor for actor in answers if actor not in winners]
    assert f"held by {winners[0]}" in str(answers[loser])
    reader = KubeClient.from_kubeconfig(str(kube.kubeconfig))
    try:
        assert annotations(reader, node)[lock.HOLDER] == winners[0]
    finally:
        reader.close()


def test_the_order_decides_who_gets_a_node_wanted_by_two(client: KubeClient, node: str) -> None:
    """An upgrade holds the node; preemption, then remediation are refused and want it. When the
    upgrade releases it, preemption (which asks first) is refused because remediation, ranked
    above it, wants the node; remediation takes it."""
    rt = runtime(client)
    assert lock.take(rt, "upgrade", node, lock.UPGRADE) is None
    why = lock.take(runtime(client, NOW + 10), "preempt", node, lock.PREEMPTION)
    assert why is not None and "held by upgrade" in why
    assert annotations(client, node)[lock.WANTED] == "preemption"
    assert lock.take(runtime(client, NOW + 20), "health", node, lock.REMEDIATION) is not None
    assert annotations(client, node)[lock.WANTED] == "remediation"
    # A lower-ranked actor refused again does not take the want away.
    assert lock.take(runtime(client, NOW + 30), "preempt", node, lock.PREEMPTION) is not None
    assert annotations(client, node)[lock.WANTED] == "remediation"

    lock.release(runtime(client, NOW + 40), "upgrade", node, lock.UPGRADE)
    why = lock.take(runtime(client, NOW + 50), "preempt", node, lock.PREEMPTION)
    assert why is not None and "wanted first by remediation" in why
    assert lock.take(runtime(client, NOW + 60), "health", node, lock.REMEDIATION) is None
    found = annotations(client, node)
    assert found[lock.HOLDER] == "remediation"
    assert lock.WANTED not in found


def test_a_want_is_recorded_though_the_node_changed_since_it_was_read(
    client: KubeClient, node: str
) -> None:
    assert lock.take(runtime(client), "upgrade", node, lock.UPGRADE) is None
    # as the node lifecycle controller does a Node with no kubelet, between read and write
    path = node_path(node)
    racing = WrittenAfterRead(
        client, {path: lambda: client.merge_patch(path, {"metadata": {"labels": {"w": "1"}}})}
    )
    why = lock.take(runtime(racing, NOW + 10), "preempt", node, lock.PREEMPTION)
    assert not racing.writes  # the node was written between the read and the want's write
    assert why is not None and "held by upgrade" in why
    assert annotations(client, node)[lock.WANTED] == "preemption"


def test_a_stale_hold_is_taken_and_a_workflows_hold_lives_with_its_state(
    client: KubeClient, node: str
) -> None:
    old = NOW - lock.HOLD_SECONDS - 1
    stale = {lock.HOLDER: "preemption", lock.HELD_SINCE: str(int(old))}
    client.merge_patch(node_path(node), {"metadata": {"annotations": stale}})
    assert lock.take(runtime(client), "upgrade", node, lock.UPGRADE) is None

    # The upgrade's hold is as old, but its state label still holds the node: it is live.
    client.merge_patch(
        node_path(node),
        {
            "metadata": {
                "annotations": {lock.HELD_SINCE: str(int(old))},
                "labels": {"fleetplane.dev/upgrade-state": "drain-required"},
            }
        },
    )
    why = lock.take(runtime(client), "health", node, lock.REMEDIATION)
    assert why is not None and "held by upgrade" in why


def test_dry_run_writes_nothing(client: KubeClient, node: str) -> None:
    rt = runtime(client, dry_run=True)
    assert lock.take(rt, "upgrade", node, lock.UPGRADE) is None
    assert lock.HOLDER not in annotations(client, node)
    assert "DRY-RUN upgrade: would hold-node" in cast(io.StringIO, rt.out).getvalue()
