"""Spend end to end: pod lifetimes on kwok GPU nodes priced from the configuration, the
accumulator on the team namespace, the document in OPA, budget Events, and the admission gate
denying the over-budget team's next workload."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controller.decide.spend import month_of, month_start, pod_key
from tests.controller.conftest import Harness, bare_pod, started_at, wait_for

pytestmark = pytest.mark.integration

H100_ON_DEMAND = 12.29


def hours_at(now: float, start: float) -> float:
    return (now - max(start, month_start(now))) / 3600


def admission_review(namespace: str) -> dict[str, Any]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "next-run",
            "namespace": namespace,
            "labels": {"fleetplane.dev/workload-type": "training"},
            # the gate requires the team's Volcano queue on accelerator pods
            "annotations": {"scheduling.volcano.sh/queue-name": "research"},
        },
        "spec": {
            "priorityClassName": "fleetplane-training",
            "activeDeadlineSeconds": 600,  # estimated at 1 GPU x 10 min: about 2 USD
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
        },
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "5f0c2b8e-0000-4000-8000-000000000001",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE",
            "namespace": namespace,
            "userInfo": {"username": "alice@example.com"},
            "object": pod,
        },
    }


def test_spend_is_accounted_published_and_enforced(harness: Harness) -> None:
    h = harness
    h.document["teams"]["research"]["monthly_budget_usd"] = 160.0
    h.opa.put_data("fleetplane/config", h.document)
    allowed_before = h.opa.review(admission_review(h.namespace))["response"]["allowed"]

    for name, gpus in (("a", 4), ("b", 2)):
        pod = bare_pod(name, "training", gpus=gpus, node="h100-ondemand-5")
        pod["metadata"]["labels"]["app"] = name
        h.create(pod)
    pods = {
        p["metadata"]["name"]: p for p in h.wait_running("fleetplane.dev/workload-type", count=2)
    }
    start = {name: started_at(p) for name, p in pods.items()}

    now = max(start.values()) + 2 * 3600
    run = h.run(now, concerns=("spend",))
    assert run.summary.errors == 0, run.summary.as_dict()
    want = sum(H100_ON_DEMAND * gpus * hours_at(now, start[n]) for n, gpus in (("a", 4), ("b", 2)))
    spend = h.opa.query("fleetplane/spend")["research"]
    assert spend["month"] == month_of(now)
    assert spend["usd"] == pytest.approx(want, abs=0.02)
    assert spend["updated_at"] == int(now)

    namespace = h.client.get(f"/api/v1/namespaces/{h.namespace}")
    accumulator = json.loads(namespace["metadata"]["annotations"]["fleetplane.dev/spend"])
    assert accumulator["v"] == 2
    assert set(accumulator["pods"]) == {pod_key(p["metadata"]["uid"]) for p in pods.values()}
    assert accumulator["alerts"] == ["warn"]  # ~147 USD of 160: past the 80 % line only
    assert h.reasons(h.namespace) == ["BudgetWarnThreshold"]

    # The admission gate admits the next small workload, with a budget warning.
    assert allowed_before is True
    answer = h.opa.review(admission_review(h.namespace))["response"]
    assert answer["allowed"] is True
    assert any("budget" in w for w in answer.get("warnings", []))

    # A deleted pod's spend is not forgotten; thresholds are not announced twice.
    h.client.delete(f"/api/v1/namespaces/{h.namespace}/pods/b", {"gracePeriodSeconds": 0})
    wait_for(lambda: len(h.pods("app=b")) == 0, 30)
    later = now + 3600
    h.run(later, concerns=("spend",))
    spend = h.opa.query("fleetplane/spend")["research"]
    want_later = H100_ON_DEMAND * (4 * hours_at(later, start["a"]) + 2 * hours_at(now, start["b"]))
    assert spend["usd"] == pytest.approx(want_later, abs=0.02)  # ~197 USD: over budget
    assert h.reasons(h.namespace) == ["BudgetDenyThreshold", "BudgetWarnThreshold"]
    answer = h.opa.review(admission_review(h.namespace))["response"]
    assert answer["allowed"] is False
    assert "budget" in answer["status"]["message"]
    h.run(later + 60, concerns=("spend",))  # each threshold is announced once a month
    assert h.reasons(h.namespace) == ["BudgetDenyThreshold", "BudgetWarnThreshold"]
    accumulator = json.loads(
        h.client.get(f"/api/v1/namespaces/{h.namespace}")["metadata"]["annotations"][
            "fleetplane.dev/spend"
        ]
    )
    assert accumulator["gone"] == pytest.approx(
        H100_ON_DEMAND * 2 * hours_at(now, start["b"]), abs=0.01
    )
    assert set(accumulator["pods"]) == {pod_key(pods["a"]["metadata"]["uid"])}
