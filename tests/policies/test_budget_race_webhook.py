"""The budget race through the real path (issue 33): two workloads of one team submitted at
once, each within the team's budget alone and over it together. Through the admission front
(controller/admission_front.py), which writes each admitted workload's reservation into OPA
before it answers the API server, exactly one is admitted and the other is refused with the
budget's message, the first's reservation counted. Straight to OPA (the webhook as it was),
both are admitted: neither sees the other until the controller reserves for their pods.

The pinned API server, a real OPA with the project's policies and the policy review corpus's
configuration (a monthly budget of $50,000 for team research); each pod holds 8 H100s for
1,000,000 s, about $27,300."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import requests

from controller.admission_front import AdmissionFront
from controller.observe.endpoints import Endpoint
from fleet.opa import authz_document, token_sha256
from localfleet.controlplane import LocalCluster
from localfleet.processes import free_port
from localfleet.servers import OpaServer
from tests.policies.builders import training
from tests.policies.conftest import Gate, fixture_approvals
from tests.policies.test_lifetime_webhook import pod
from tests.policies.webhook_gate import CORPUS_CONFIG, create, gated_namespace

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", autouse=True)
def priority_class(kube: LocalCluster) -> None:
    # unless another suite of the shared API server created it
    kube.kubectl("create", "priorityclass", "fleetplane-training", "--value=1000", check=False)


def submit_together(kube: LocalCluster, namespace: str) -> list[Any]:
    """Two long training pods created at the same moment; the completed kubectl processes."""
    start = threading.Barrier(2)
    results: list[Any] = [None, None]

    def one(i: int) -> None:
        start.wait()
        results[i] = create(kube, namespace, pod(f"long-{i}", 8, activeDeadlineSeconds=1_000_000))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.fixture
def fronted(kube: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with gated_namespace(kube, tmp_path_factory.mktemp("race-front"), "race", front=True) as ns:
        yield ns


@pytest.fixture
def direct(kube: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with gated_namespace(kube, tmp_path_factory.mktemp("race-direct"), "race") as ns:
        yield ns


def test_workloads_admitted_together_share_no_headroom(kube: LocalCluster, fronted: str) -> None:
    results = submit_together(kube, fronted)
    admitted = [r for r in results if r.returncode == 0]
    refused = [r for r in results if r.returncode != 0]
    assert len(admitted) == 1, [r.stderr for r in results]
    assert len(refused) == 1
    assert "budget: team research would reach" in refused[0].stderr
    assert "reserved for workloads admitted since" in refused[0].stderr


def test_straight_to_opa_both_are_admitted(kube: LocalCluster, direct: str) -> None:
    # The race the front closes: each priced against the same headroom.
    results = submit_together(kube, direct)
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]


def test_a_reservation_that_cannot_be_written_refuses(gate: Gate) -> None:
    """Fail closed: OPA allows the workload, but its entry cannot be written (here the
    document it goes in is not an object), so the front refuses and says why."""
    review = training().deadline(1_000_000).review()
    review["request"]["object"]["metadata"]["uid"] = str(uuid.uuid4())
    body = orjson.dumps(review)
    front = AdmissionFront(gate.server.url)
    gate.server.put_data("fleetplane/admitted", {})
    assert orjson.loads(front.review(body))["response"]["allowed"] is True
    assert front.reserved == 1
    gate.server.put_data("fleetplane/admitted", "not a document")
    try:
        answer = orjson.loads(front.review(body))["response"]
    finally:
        gate.server.put_data("fleetplane/admitted", {})
    assert answer["allowed"] is False
    assert answer["status"]["message"].startswith("admission-front: could not write")
    assert front.reserved == 1


def test_the_front_deletes_the_entries_it_wrote_once_they_lapse(gate: Gate) -> None:
    now = [1_800_000_000.0]
    front = AdmissionFront(gate.server.url, hold_seconds=60, clock=lambda: now[0])
    gate.server.put_data("fleetplane/admitted", {})
    uids = [str(uuid.uuid4()), str(uuid.uuid4())]
    try:
        for uid in uids:
            review = training().deadline(3600).review()
            review["request"]["object"]["metadata"]["uid"] = uid
            assert orjson.loads(front.review(orjson.dumps(review)))["response"]["allowed"]
            now[0] += 120  # the first entry lapses before the second is written
        held = gate.server.query("fleetplane/admitted/research")
    finally:
        gate.server.put_data("fleetplane/admitted", {})
    assert set(held) == {uids[1]}
    assert held[uids[1]]["expires_at"] == 1_800_000_000 + 120 + 60


def test_the_front_writes_each_entry_to_every_opa_replica(
    kube: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The gate's OPA runs several replicas, each with its own data, and the API server's next
    review may reach any of them: the admitted workload's entry is in both, not only in the one
    that judged it."""
    replicas: list[OpaServer] = []
    work = tmp_path_factory.mktemp("race-replicas")
    with gated_namespace(kube, work, "race", front=True, replicas=replicas) as namespace:
        results = submit_together(kube, namespace)
        held = [opa.query("fleetplane/admitted/research") for opa in replicas]
    assert [r.returncode for r in results].count(0) == 1, [r.stderr for r in results]
    assert len(replicas) == 2
    assert held[0] == held[1]
    assert len(held[0]) == 1


def test_a_replica_not_written_refuses(gate: Gate) -> None:
    """Fail closed: an entry that one replica did not take (here a replica that is down)
    refuses the workload, saying how many replicas took it."""
    review = training().deadline(1_000_000).review()
    review["request"]["object"]["metadata"]["uid"] = str(uuid.uuid4())
    down = Endpoint("127.0.0.1", free_port())
    up = Endpoint("127.0.0.1", gate.server.port)
    front = AdmissionFront(gate.server.url, replicas=lambda: [up, down])
    gate.server.put_data("fleetplane/admitted", {})
    try:
        answer = orjson.loads(front.review(orjson.dumps(review)))["response"]
    finally:
        gate.server.put_data("fleetplane/admitted", {})
    assert answer["allowed"] is False
    assert "reached 1 of 2 OPA replicas" in answer["status"]["message"]
    assert front.reserved == 0


def test_the_front_does_its_work_with_its_own_role(tmp_path: Path) -> None:
    """Against an OPA that authorizes every request as the gate's does (policies/system/
    authz.rego), the front's token is enough to judge, ask the reservation and write the
    entry; and the entry is all it may write."""
    token = "front-t0ken"
    (tmp_path / "token").write_text(token + "\n")
    data = tmp_path / "data"
    data.mkdir()
    config = json.loads(CORPUS_CONFIG.read_text())
    (data / "data.json").write_text(
        json.dumps({"fleetplane": {"config": config, "approvals": fixture_approvals()}})
    )
    opa = OpaServer(
        work_dir=tmp_path / "opa",
        data=(data,),
        authz=authz_document({token_sha256(token): "front"}, anonymous=None),
    ).start()
    try:
        front = AdmissionFront(opa.url, token_file=str(tmp_path / "token"))
        review = training().deadline(1_000_000).review()
        review["request"]["object"]["metadata"]["uid"] = str(uuid.uuid4())
        answer = orjson.loads(front.review(orjson.dumps(review)))["response"]
        beyond = requests.put(
            f"{opa.url}/v1/data/fleetplane/spend",
            data=b"{}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
    finally:
        opa.stop()
    assert answer["allowed"] is True, answer
    assert front.reserved == 1
    assert beyond.status_code == 401
