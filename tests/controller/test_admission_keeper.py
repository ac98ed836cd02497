"""The admission keeper (`fleetplane controller admission --watch`) against a real kube-apiserver
and a real OPA run as the gate's: a workload whose pods are created is reserved against its
team within seconds, with no pass of the CronJob in between, so the next workload of the team
is refused for budget; once its pods are deleted the reservation goes, and the next fits.
The figures (seconds from a pod's creation to its reservation in OPA) are printed (`-s`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.admission_keeper import LEASE_SUFFIX, keep_admission_data
from controller.config import Settings, parse_config
from controller.errors import NotFoundError
from controller.log import Log
from controller.observe.kube import KubeClient, object_path
from controller.reconcile import run_pass
from localfleet.controlplane import LocalCluster
from tests.controller.conftest import (
    closed_url,
    gate_opa,
    gate_settings,
    research_home_config,
    spent_this_month,
)
from tests.controller.test_admission_data import ask, read
from tests.policies.builders import training

pytestmark = pytest.mark.integration

WITHIN = 15.0
"""Seconds a change may take to reach OPA: one watch wake-up and one snapshot, on a loaded
2-core machine (measured: see the printed figures)."""


def until(what: str, check: Callable[[], bool], timeout: float = WITHIN) -> float:
    """Seconds until `check` holds; fails naming `what` after `timeout`."""
    began = time.monotonic()
    while not check():
        assert time.monotonic() - began < timeout, f"{what}: not within {timeout:.0f} s"
        time.sleep(0.05)
    return time.monotonic() - began


class Recorded(Log):
    """The keeper's log events, kept in order (and logged as usual)."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, dict[str, Any]]] = []

    def _emit(self, level: int, event: str, fields: dict[str, Any]) -> None:
        self.events.append((event, fields))
        super()._emit(level, event, fields)

    def wakes(self, namespace: str) -> list[str]:
        """Why it woke, for the pods of `namespace` (other tests' pods may wake it too)."""
        return [
            fields["reason"]
            for event, fields in self.events
            if event == "keeper.wake" and f" {namespace}/" in fields["reason"]
        ]


@pytest.fixture
def keeper(
    kube: LocalCluster, namespace: str, tmp_path: Path
) -> Iterator[tuple[KubeClient, Any, Settings, dict[str, Any]]]:
    config = research_home_config(namespace)
    client = KubeClient.from_kubeconfig(str(kube.kubeconfig))
    opa = gate_opa(tmp_path, config)
    opa.start()
    settings = gate_settings(opa, tmp_path, namespace, kept=False)
    try:
        yield client, opa, settings, config
    finally:
        opa.stop()
        client.close()


def test_a_workload_is_reserved_as_its_pods_are_created_not_at_the_next_pass(
    keeper: tuple[KubeClient, Any, Settings, dict[str, Any]], namespace: str
) -> None:
    client, opa, settings, config = keeper
    fleet = parse_config(config)
    # research has spent $46,000 of its $50,000 this month: a day of 8 H100 (about $2,360)
    # still fits, two do not
    spent_this_month(client, namespace, 46_000.0)
    summary = run_pass(kube=client, fleet=fleet, settings=settings, concerns=("spend",))
    assert not summary.errors, summary.as_dict()
    second = training().in_namespace(namespace).in_queue("research").review()
    assert ask(opa, second).allowed

    stop = threading.Event()
    log = Recorded()
    passes: list[int] = []
    thread = threading.Thread(
        target=lambda: passes.append(
            keep_admission_data(
                kube=client,
                fleet=fleet,
                settings=settings,
                interval=0.5,
                refresh=3600,
                stop=stop,
                log=log,
            )
        ),
        daemon=True,
    )
    thread.start()
    try:
        # the keeper's first pass publishes an empty reservations document
        until("the first pass", lambda: read(opa, "fleetplane/reservations") == {})

        # released after each pass; the pass publishes before it releases, so the release
        # may come a moment after the document is seen
        def lease_holder() -> Any:
            lease = client.get(
                object_path(
                    "coordination.k8s.io/v1",
                    "leases",
                    namespace,
                    settings.lease_name + LEASE_SUFFIX,
                )
            )
            return lease["spec"].get("holderIdentity")

        until("the lease released after the first pass", lambda: lease_holder() is None)

        # a workload admitted: its pod exists (pending: no scheduler for it here)
        pod = training().in_namespace(namespace).in_queue("research").object()
        pod["metadata"]["name"] = "first"
        pod["spec"].pop("priorityClassName", None)  # this API server has none declared
        client.create(object_path("v1", "pods", namespace, None), pod)
        reserved = until(
            "the new pod's reservation",
            lambda: bool((read(opa, "fleetplane/reservations") or {}).get("research")),
        )
        print(f"pod created -> reserved in OPA: {reserved:.2f} s")
        refused = ask(opa, second)
        assert refused.rules == {"budget"}, refused.messages
        assert log.wakes(namespace) == [f"pod added {namespace}/first"]

        # an update (here a label; usually a status) does not wake it: it only lowers what is
        # reserved, which the next refresh catches
        client.merge_patch(
            object_path("v1", "pods", namespace, "first"),
            {"metadata": {"labels": {"touched": "yes"}}},
        )
        time.sleep(2)
        assert log.wakes(namespace) == [f"pod added {namespace}/first"]

        # the workload ends: the deletion wakes the keeper too, and the second fits again
        client.delete(object_path("v1", "pods", namespace, "first"), {"gracePeriodSeconds": 0})
        until("the pod gone", lambda: _gone(client, namespace, "first"))
        released = until(
            "the reservation dropped", lambda: read(opa, "fleetplane/reservations") == {}
        )
        print(f"pod deleted -> reservation dropped: {released:.2f} s")
        assert ask(opa, second).allowed
        assert log.wakes(namespace) == [
            f"pod added {namespace}/first",
            f"pod deleted {namespace}/first",
        ]
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive(), "the keeper did not stop within 30 s of being asked"
    assert passes and passes[0] >= 3  # the first, the creation's, the deletion's


def _gone(client: KubeClient, namespace: str, name: str) -> bool:
    try:
        client.get(object_path("v1", "pods", namespace, name))
    except NotFoundError:
        return True
    return False


def test_while_the_api_server_is_down_it_backs_off_and_stops_when_asked() -> None:
    """Nothing listens where the API server should be: each try fails at once, and the keeper
    waits twice as long after each failure (0.1, 0.2, 0.4, ... s), not `interval` every time
    (about 30 tries in 3 s); it acts on nothing and stops when asked."""
    from controller.observe.kube import Credentials

    client = KubeClient(Credentials(server=closed_url()), timeout=2)
    settings = Settings(prometheus_url=closed_url(), opa_url=closed_url())
    stop = threading.Event()
    log = Recorded()
    thread = threading.Thread(
        target=keep_admission_data,
        kwargs={
            "kube": client,
            "fleet": parse_config(research_home_config("nowhere")),
            "settings": settings,
            "interval": 0.1,
            "refresh": 3600,
            "stop": stop,
            "log": log,
        },
        daemon=True,
    )
    thread.start()
    time.sleep(3)
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive()
    failed = [fields for event, fields in log.events if event == "keeper.list.failed"]
    assert 3 <= len(failed) <= 6, [f["retry_in_seconds"] for f in failed]
    waits = [f["retry_in_seconds"] for f in failed]
    assert waits == sorted(waits) and waits[1] == 2 * waits[0], waits
    assert "cannot connect" in failed[0]["error"]
    assert not [event for event, _ in log.events if event == "keeper.pass"]
    assert log.events[-1] == ("keeper.stop", {"passes": 0})
