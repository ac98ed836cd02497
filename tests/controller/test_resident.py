"""A resident controller (`fleetplane controller reconcile --watch`, `controller.resident`)
against a real kube-apiserver and a real OPA run as the gate's: once a period the keeper's pass
is the whole reconcile pass, on its watched copy, under the controller's own Lease, its summary
published; between them, a pod created wakes an admission pass as before."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from controller.admission_keeper import LEASE_SUFFIX, keep_admission_data
from controller.config import Settings, parse_config
from controller.observe.kube import KubeClient, object_path
from controller.reconcile import CONCERNS
from controller.summary import Summary
from tests.controller.test_admission_keeper import Recorded, keeper, until
from tests.policies.builders import training

pytestmark = pytest.mark.integration

__all__ = ["keeper"]  # the fixture, used here as in the keeper's own tests


def test_a_whole_pass_each_period_and_admission_passes_between(
    keeper: tuple[KubeClient, Any, Settings, dict[str, Any]], namespace: str
) -> None:
    client, _opa, settings, config = keeper
    published: list[Summary] = []
    stop = threading.Event()
    log = Recorded()
    thread = threading.Thread(
        target=keep_admission_data,
        kwargs={
            "kube": client,
            "fleet": parse_config(config),
            "settings": settings,
            "interval": 0.2,
            "refresh": 3600,
            "stop": stop,
            "log": log,
            # long enough that a whole pass on a loaded machine ends well before the next is
            # due, so the creation below wakes an admission pass, not an early whole one
            "full_every": 12.0,
            "publish": published.append,
        },
        daemon=True,
    )
    thread.start()
    try:
        until("the first whole pass, at once", lambda: len(published) >= 1, timeout=60)
        whole = published[0].as_dict()
        # every concern of the registry ran, and the team metrics were worked out
        phases = {k.split("phase=")[1].rstrip("}") for k in whole if k.startswith("phase_")}
        assert {*CONCERNS, "observe"} <= phases, phases
        assert f"namespace_team{{namespace={namespace},team=research}}" in whole
        # a pod created between whole passes wakes an admission pass
        pod = training().in_namespace(namespace).in_queue("research").object()
        pod["metadata"]["name"] = "between"
        pod["spec"].pop("priorityClassName", None)  # this API server has none declared
        client.create(object_path("v1", "pods", namespace, None), pod)
        until("the creation's wake", lambda: bool(log.wakes(namespace)), timeout=30)
        until("the second whole pass, a period later", lambda: len(published) >= 2, timeout=60)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()
    kinds = [fields["kind"] for event, fields in log.events if event == "keeper.pass"]
    assert kinds[0] == "full" and kinds.count("full") == len(published) >= 2
    assert "admission" in kinds[kinds.index("full") + 1 :], kinds
    # the whole passes under the controller's Lease, the admission passes under the keeper's
    for name in (settings.lease_name, settings.lease_name + LEASE_SUFFIX):
        lease = client.get(object_path("coordination.k8s.io/v1", "leases", namespace, name))
        assert lease["spec"].get("holderIdentity") is None, name  # released after each pass
