"""The documents the gate reads and the controller writes, end to end: a real kube-apiserver
and a real OPA run as the gate's (authorization on, the controller's token, data loaded from
files as the Deployment mounts them). A StatefulSet scaled through its scale subresource is
judged by the record the controller wrote (allowed within it, refused beyond it); a workload
the controller has seen reserves what it will still cost, so the next one admitted before the
spend includes it is priced against the team's budget with it; both survive an OPA restart."""

from __future__ import annotations

import io
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import requests

from controller.config import parse_config
from controller.errors import NotFoundError
from controller.observe.kube import KubeClient, object_path
from controller.reconcile import run_pass
from fleet.opa import controller_data_files
from fleet.opa_shards import shard_files
from localfleet.controlplane import LocalCluster
from localfleet.servers import OpaServer
from tests.controller.conftest import (
    CONTROLLER_TOKEN,
    KEPT,
    gate_opa,
    gate_settings,
    research_home_config,
    spent_this_month,
)
from tests.policies.builders import Verdict, training

pytestmark = pytest.mark.integration


def ask(opa: OpaServer, review: dict[str, Any]) -> Verdict:
    """The gate's answer, asked as the API server asks (no token)."""
    answer = requests.post(f"{opa.url}/", json=review, timeout=10)
    assert answer.status_code == 200, answer.text
    return Verdict(answer.json()["response"])


def scale_review(namespace: str, sts: dict[str, Any], old: int, new: int) -> dict[str, Any]:
    """What the API server sends for `kubectl scale statefulset/<name> --replicas=<new>`."""
    metadata = {
        "name": sts["metadata"]["name"],
        "namespace": namespace,
        "uid": sts["metadata"]["uid"],
    }

    def scale(replicas: int) -> dict[str, Any]:
        return {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": metadata,
            "spec": {"replicas": replicas},
        }

    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0b7e6a52-5c3d-4a3e-9d0c-0d2a3c4b5e6f",
            "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "resource": {"group": "apps", "version": "v1", "resource": "statefulsets"},
            "subResource": "scale",
            "name": metadata["name"],
            "namespace": namespace,
            "operation": "UPDATE",
            "userInfo": {"username": "alice@example.com"},
            "object": scale(new),
            "oldObject": scale(old),
        },
    }


def read(opa: OpaServer, path: str) -> Any:
    answer = requests.get(
        f"{opa.url}/v1/data/{path}",
        headers={"Authorization": f"Bearer {CONTROLLER_TOKEN}"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return answer.json().get("result")


def test_the_gate_judges_by_the_documents_the_controller_writes(
    kube: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    config = research_home_config(namespace)
    client = KubeClient.from_kubeconfig(str(kube.kubeconfig))
    # research has spent $46,000 of its $50,000 this month: a day of 8 H100 (about $2,360)
    # still fits, two do not
    spent_this_month(client, namespace, 46_000.0)
    # 8 H100 per replica; training may hold 64, an approval is needed from 32
    sts = client.create(
        object_path("apps/v1", "statefulsets", namespace, None),
        training().in_namespace(namespace).in_queue("research").as_statefulset(1).object(),
    )
    kept = tmp_path / "controller-data"
    kept.mkdir()
    opa = gate_opa(tmp_path, config, kept)
    opa.start()
    settings = gate_settings(opa, tmp_path, namespace, kept=True)

    def run(concerns: tuple[str, ...], **overrides: Any) -> str:
        printed = io.StringIO()
        summary = run_pass(
            kube=client,
            fleet=parse_config(config),
            settings=replace(settings, **overrides),
            concerns=concerns,
            now=time.time(),
            out=printed,
        )
        assert not summary.errors, summary.as_dict()
        return printed.getvalue()

    key = f"statefulsets.apps/{sts['metadata']['name']}"
    try:
        # no record yet: a scale-up through the subresource is refused
        unknown = ask(opa, scale_review(namespace, sts, 1, 2))
        assert not unknown.allowed and unknown.says("has no record of what one replica")

        # a dry run says what it would publish and keep, and writes neither
        printed = run(("admission",), dry_run=True)
        assert "would publish data.fleetplane.workloads" in printed
        assert f"would keep ConfigMap/{namespace}/{KEPT}-workloads-*: workloads" in printed
        assert read(opa, f"fleetplane/workloads/{namespace}") is None
        with pytest.raises(NotFoundError):
            client.get(object_path("v1", "configmaps", namespace, KEPT))

        run(("spend",))
        second = training().in_namespace(namespace).in_queue("research").review()
        assert ask(opa, second).allowed  # $46,000 + $2,360: under the budget

        # a workload admitted: its pod exists (pending: no scheduler here) and will still cost
        # a day of 8 GPUs; the controller's pass reserves it
        pod = training().in_namespace(namespace).in_queue("research").object()
        pod["metadata"]["name"] = "first"
        pod["spec"].pop("priorityClassName", None)  # this API server has none declared
        client.create(object_path("v1", "pods", namespace, None), pod)
        run(("spend", "admission"))

        record = read(opa, f"fleetplane/workloads/{namespace}")[key]
        assert record == {
            "uid": sts["metadata"]["uid"],
            "kind": "StatefulSet",
            "workload_type": "training",
            "devices_per_replica": 8,
            "approval_id": None,
            "replicas": 1,
            "pod_labels": sts["spec"]["template"]["metadata"]["labels"],
        }
        assert ask(opa, scale_review(namespace, sts, 1, 3)).allowed  # 24 GPUs
        beyond = ask(opa, scale_review(namespace, sts, 1, 4))  # 32: an approval is needed
        assert not beyond.allowed
        assert beyond.says(f"{key} at 4 replicas would hold 32 accelerators")

        reservations = read(opa, "fleetplane/reservations")["research"]["workloads"]
        assert len(reservations) >= 1 and all(
            e["expires_at"] > time.time() + 23 * 3600 for e in reservations.values()
        )
        refused = ask(opa, second)
        assert refused.rules == {"budget"}, refused.messages

        # both survive a restart of OPA: the ConfigMap's files, as the Deployment mounts them
        configmap = client.get(object_path("v1", "configmaps", namespace, KEPT))
        assert "approval-bindings.json" in configmap["data"]

        def part(name: str) -> dict[str, str] | None:
            try:
                return client.get(object_path("v1", "configmaps", namespace, name))["data"]
            except NotFoundError:
                return None

        # the fleet-sized documents in parts beside it (fleet/opa_shards.py)
        parts = shard_files(KEPT, part)
        assert any(p.startswith("fleetplane/reservations/") for p in parts)
        assert any(p.startswith("fleetplane/workloads/") for p in parts)
        files = {**controller_data_files(configmap["data"]), **parts}
        for path, text in files.items():
            target = kept / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        opa.restart()
        assert ask(opa, scale_review(namespace, sts, 1, 3)).allowed
        assert not ask(opa, scale_review(namespace, sts, 1, 4)).allowed
        assert ask(opa, second).rules == {"budget"}

        # the workload ends: the next pass drops its reservation, and the second fits again
        client.delete(object_path("v1", "pods", namespace, "first"))
        deadline = time.time() + 120  # its grace, and more on a loaded machine
        while time.time() < deadline:
            try:
                client.get(object_path("v1", "pods", namespace, "first"))
            except NotFoundError:
                break
            time.sleep(0.2)
        run(("admission",))
        assert read(opa, "fleetplane/reservations") == {}
        assert ask(opa, second).allowed
    finally:
        opa.stop()
        client.close()
