"""The admission front's Lease against the pinned API server: one front judges at a time, a
second waits until the first gives the Lease back, and a front that cannot renew stops judging
before its Lease could be taken over."""

from __future__ import annotations

import threading
import time

import orjson
import pytest

from controller.admission_front import AdmissionFront, Holding
from controller.lease import Lease
from controller.observe.kube import KubeClient

pytestmark = pytest.mark.integration


def holding(client: KubeClient, namespace: str, stop: threading.Event) -> Holding:
    return Holding(Lease(client, namespace=namespace, name="front", seconds=6), stop)


def test_one_front_judges_at_a_time(client: KubeClient, namespace: str) -> None:
    first_stop, second_stop = threading.Event(), threading.Event()
    first, second = holding(client, namespace, first_stop), holding(client, namespace, second_stop)
    assert first.take()
    assert first()
    taken: list[bool] = []
    waiting = threading.Thread(target=lambda: taken.append(second.take()))
    waiting.start()
    time.sleep(3)  # more than a renewal period: the second still waits
    assert taken == []
    assert not second()
    # a front that stops gives its Lease back, and the one waiting takes it
    first_stop.set()
    first.lease.release()
    waiting.join(timeout=30)
    assert taken == [True]
    assert second()
    second_stop.set()
    second.lease.release()


def test_a_front_that_cannot_renew_stops_judging(client: KubeClient, namespace: str) -> None:
    stop = threading.Event()
    front_holding = holding(client, namespace, stop)
    assert front_holding.take()
    taken = time.monotonic()
    stop.set()  # renewals stop, as when the API server cannot be reached
    front = AdmissionFront("http://127.0.0.1:9", holding=front_holding)
    review = {"request": {"uid": "u-1"}}
    deadline = time.monotonic() + 10
    while front_holding() and time.monotonic() < deadline:
        time.sleep(0.2)
    # stopped judging before the Lease's 6 s could lapse and another take it
    assert not front_holding()
    assert time.monotonic() - taken < 6
    answer = orjson.loads(front.review(orjson.dumps(review)))["response"]
    assert answer == {
        "uid": "u-1",
        "allowed": False,
        "status": {
            "code": 503,
            "reason": "ServiceUnavailable",
            "message": "admission-front: not serving: its Lease is not held; try again",
        },
    }
    front_holding.lease.release()
