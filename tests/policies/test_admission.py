"""The admission gate through a real OPA server: every rule, allowed and denied, sent as the
AdmissionReview the API server would send (POST / with the review as the body)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.policies.builders import Workload, cpu, inference, notebook, training
from tests.policies.cases import CASES
from tests.policies.conftest import Gate

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("workload", "rules"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule(gate: Gate, workload: Workload, rules: set[str]) -> None:
    verdict = gate.review(workload)
    assert verdict.rules == rules, verdict.messages
    assert verdict.allowed == (not rules)
    assert len(verdict.messages) >= len(rules)


KINDS = {
    "pod": lambda w: w,
    # Without surge: a rollout's surge pods are judged on their own (lifetime_test.rego).
    "deployment": lambda w: w.as_deployment(strategy={"type": "Recreate"}),
    "statefulset": lambda w: w.as_statefulset(),
    "job": lambda w: w.as_job(),
    "cronjob": lambda w: w.as_cronjob("Forbid"),
    "volcano job": lambda w: w.as_volcano_job(),
}


@pytest.mark.parametrize("wrap", KINDS.values(), ids=KINDS.keys())
def test_every_kind_is_gated_on_its_pod_template(gate: Gate, wrap: Any) -> None:
    assert gate.review(wrap(notebook().gpus(2))).rules == {"max-accelerators"}
    assert gate.review(wrap(notebook())).allowed


def test_response_echoes_the_uid_and_explains_each_rule(gate: Gate) -> None:
    review = notebook().gpus(2).priority(None).review(uid="b8f4e0a7-0000-4c1e-9a1e-2f6f1c2d3e4f")
    verdict = gate.review(review)
    assert verdict.uid == "b8f4e0a7-0000-4c1e-9a1e-2f6f1c2d3e4f"
    assert verdict.response["status"]["code"] == 403
    assert verdict.messages == [
        "max-accelerators: the workload holds 2 accelerators at once (replicas x devices per "
        "pod); notebook workloads may hold at most 1, so reduce replicas or devices",
        "priority-class: pod has priorityClassName null; notebook workloads must use one of: "
        "fleetplane-notebook",
    ]


def test_missing_model_message_names_the_label_to_add(gate: Gate) -> None:
    verdict = gate.review(training().no_model())
    assert verdict.says(
        "add nodeSelector nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB (team default)"
    )


def test_allowed_response_has_no_status(gate: Gate) -> None:
    response = gate.review(training()).response
    assert response["allowed"] is True
    assert "status" not in response
    assert "warnings" not in response


def test_default_decision_path_serves_the_same_answer(gate: Gate) -> None:
    review = notebook().gpus(2).review(uid="same")
    by_path = gate.server.query("system/main", review)
    assert by_path == gate.server.review(review)


# ------------------------------------------------------------------ malformed reviews


def _without(review: dict[str, Any], *path: Any) -> dict[str, Any]:
    review = copy.deepcopy(review)
    target = review
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return review


def _with(review: dict[str, Any], value: Any, *path: Any) -> dict[str, Any]:
    review = copy.deepcopy(review)
    target = review
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return review


VALID = training().review(uid="malformed")
MALFORMED: dict[str, tuple[Any, str]] = {
    "empty body": ({}, "apiVersion must be admission.k8s.io/v1"),
    "v1beta1": (_with(VALID, "admission.k8s.io/v1beta1", "apiVersion"), "apiVersion must be"),
    "no request": (_without(VALID, "request"), "request is missing"),
    "no uid": (_without(VALID, "request", "uid"), "request.uid must be a non-empty string"),
    "no kind": (_without(VALID, "request", "kind"), "request.kind must be {group, version, kind}"),
    "no operation": (_without(VALID, "request", "operation"), "request.operation must be one of"),
    "no object": (
        _without(VALID, "request", "object"),
        "request.object must be the object under review",
    ),
    "no namespace": (
        _without(
            _without(VALID, "request", "namespace"), "request", "object", "metadata", "namespace"
        ),
        "request.namespace is missing",
    ),
    "no spec": (_without(VALID, "request", "object", "spec"), "pod.spec is missing"),
    "no containers": (
        _with(VALID, [], "request", "object", "spec", "containers"),
        "pod.spec.containers must be a non-empty list",
    ),
    "container without image": (
        _without(VALID, "request", "object", "spec", "containers", 0, "image"),
        'pod containers "main": image must be a non-empty string',
    ),
    "replicas as text": (
        inference().as_deployment(replicas="2").review(),
        'spec.template: replicas "2" must be a non-negative integer',
    ),
    "deadline as text": (training().deadline("1h").review(), "activeDeadlineSeconds"),
    "volcano job without tasks": (
        _with(training().as_volcano_job().review(), [], "request", "object", "spec", "tasks"),
        "spec.tasks must be a non-empty list of tasks",
    ),
}


@pytest.mark.parametrize(("review", "text"), MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_review_is_denied_with_a_clear_message(
    gate: Gate, review: dict[str, Any], text: str
) -> None:
    verdict = gate.review(review)
    assert verdict.allowed is False
    assert verdict.says(text), verdict.messages


@pytest.mark.parametrize("body", [[], "review", 42, None], ids=["list", "string", "number", "null"])
def test_body_that_is_not_a_review_is_denied(gate: Gate, body: Any) -> None:
    answer = gate.server.query("system/main", body)
    assert answer["response"]["allowed"] is False
    assert answer["response"]["uid"] == ""


# ------------------------------------------------------------------ operations


def test_pod_update_only_judges_new_images(gate: Gate) -> None:
    running = cpu().image("ubuntu")  # admitted before the registry rule existed
    assert gate.review(running.updated_from(running)).allowed
    assert gate.review(running.image("alpine").updated_from(running)).rules == {"image-registry"}
    assert gate.review(running.image("nvcr.io/x").updated_from(running)).allowed


def test_controller_annotating_a_running_pod_is_allowed(gate: Gate, fleet_config: Any) -> None:
    running = notebook()
    warned = running.annotate("fleetplane.dev/idle-warned-at", "1795000000")
    controller = fleet_config["platform"]["controller_service_account"]
    assert gate.review(warned.updated_from(running).by(controller)).allowed
    # issue 19: the keys the controller acts on are the platform's; a user may not set them
    assert not gate.review(warned.updated_from(running)).allowed


def test_status_updates_and_deletes_are_not_judged(gate: Gate) -> None:
    bad = training().gpus("abc").image("ubuntu")
    assert gate.review(bad.updated_from(bad).subresource("status")).allowed
    delete = _with(bad.review(), "DELETE", "request", "operation")
    delete["request"]["object"] = None
    assert gate.review(delete).allowed


def test_workload_update_is_judged_without_budget(gate: Gate, spend: Any) -> None:
    spend(research=10**6)
    job = training().as_job()
    assert gate.review(job.updated_from(job)).allowed
    assert gate.review(job.priority(None).updated_from(job)).rules == {"priority-class"}
