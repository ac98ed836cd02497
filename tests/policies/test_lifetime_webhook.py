"""What a workload holds over its life and what it lets the platform do to it, judged through
the real path (issue 33): the pinned API server calls the gate's webhook on a real OPA
(tests/policies/webhook_gate.py). A disruption budget that leaves no eviction of pods that may
hold accelerators, an accelerator pod with required pod anti-affinity, a relabel of an
admitted pod and a Deployment update that raises its surge over the type's limit are refused;
their ordinary neighbours are admitted. Pods are only created (no scheduler runs here): the
gate judges the objects the API server sends, not where they run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from localfleet.controlplane import LocalCluster
from tests.policies.test_kinds_webhook import template
from tests.policies.webhook_gate import create, gated_namespace

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def gated(kube: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # Pods name their priority class, which the API server resolves: create it unless
    # another suite of the shared API server did.
    kube.kubectl("create", "priorityclass", "fleetplane-training", "--value=1000", check=False)
    with gated_namespace(kube, tmp_path_factory.mktemp("life-gate"), "life") as namespace:
        yield namespace


def budget(name: str, selector: dict[str, Any], **limits: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"selector": selector, **limits},
    }


def pod(name: str, gpus: int, **spec: Any) -> dict[str, Any]:
    body = template(gpus)
    body["spec"]["activeDeadlineSeconds"] = 3600  # an hour of 8 H100s fits the team's budget
    body["spec"].update(spec)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **body["metadata"]},
        "spec": body["spec"],
    }


def deployment(name: str, replicas: int, surge: int) -> dict[str, Any]:
    body = template(8)
    body["metadata"]["labels"]["app"] = name
    # From 32 accelerators on, an approval (the fixture's lets team research hold 64).
    body["metadata"]["annotations"]["fleetplane.dev/approval-id"] = "APR-2026-001"
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": surge, "maxUnavailable": 1},
            },
            "template": body,
        },
    }


def test_a_disruption_budget_must_leave_the_platform_an_eviction(
    kube: LocalCluster, gated: str
) -> None:
    trainers = {"matchLabels": {"app": "trainer"}}
    refused = create(kube, gated, budget("none-left", trainers, maxUnavailable=0))
    assert refused.returncode != 0
    assert "admission.fleetplane.dev" in refused.stderr
    assert "eviction-budget: PodDisruptionBudget none-left sets maxUnavailable 0" in refused.stderr
    refused = create(kube, gated, budget("all-kept", trainers, minAvailable="100%"))
    assert "eviction-budget: PodDisruptionBudget all-kept sets minAvailable 100%" in refused.stderr
    admitted = create(kube, gated, budget("one-at-a-time", trainers, maxUnavailable=1))
    assert admitted.returncode == 0, admitted.stderr
    # A CPU service's budget that excludes accelerator pods keeps any setting.
    cpu_only = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "fleetplane.dev/workload-type", "operator": "DoesNotExist"}],
    }
    admitted = create(kube, gated, budget("web", cpu_only, maxUnavailable=0))
    assert admitted.returncode == 0, admitted.stderr
    # An update that takes the eviction away is judged as a create.
    patched = kube.kubectl(
        "patch",
        "-n",
        gated,
        "pdb",
        "one-at-a-time",
        "--type=merge",
        "-p",
        json.dumps({"spec": {"maxUnavailable": 0}}),
        check=False,
    )
    assert patched.returncode != 0
    assert "eviction-budget:" in patched.stderr


def test_an_accelerator_pod_may_not_require_pod_anti_affinity(
    kube: LocalCluster, gated: str
) -> None:
    term = {
        "labelSelector": {"matchLabels": {"app": "trainer"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    refused = create(
        kube,
        gated,
        pod(
            "apart",
            8,
            affinity={
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
            },
        ),
    )
    assert refused.returncode != 0
    assert (
        "unmodellable-placement: pod asks for accelerators with required pod anti-affinity"
        in refused.stderr
    )
    preferred = {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "podAffinityTerm": term}]
    }
    admitted = create(
        kube, gated, pod("apart-if-possible", 8, affinity={"podAntiAffinity": preferred})
    )
    assert admitted.returncode == 0, admitted.stderr


def test_an_admitted_pod_keeps_its_workload_type(kube: LocalCluster, gated: str) -> None:
    admitted = create(kube, gated, pod("typed", 8))
    assert admitted.returncode == 0, admitted.stderr
    relabelled = kube.kubectl(
        "label",
        "-n",
        gated,
        "pod",
        "typed",
        "fleetplane.dev/workload-type=inference",
        "--overwrite",
        check=False,
    )
    assert relabelled.returncode != 0
    assert (
        'pod-relabel: pod typed changes label fleetplane.dev/workload-type from "training" to "inference"'
        in relabelled.stderr
    )
    labelled = kube.kubectl("label", "-n", gated, "pod", "typed", "team.example/run=7", check=False)
    assert labelled.returncode == 0, labelled.stderr


def test_an_update_that_raises_the_surge_is_judged(kube: LocalCluster, gated: str) -> None:
    # 4 replicas x 8 GPUs, no surge: 32 at once, within training's 64 and the approval's.
    admitted = create(kube, gated, deployment("serve", replicas=4, surge=0))
    assert admitted.returncode == 0, admitted.stderr
    # Surge 5 on the same template: 72 at once during every rollout.
    raised = kube.kubectl(
        "patch",
        "-n",
        gated,
        "deployment",
        "serve",
        "--type=merge",
        "-p",
        json.dumps({"spec": {"strategy": {"rollingUpdate": {"maxSurge": 5}}}}),
        check=False,
    )
    assert raised.returncode != 0
    assert "max-accelerators: the workload holds 72 accelerators at once" in raised.stderr
    kept = kube.kubectl(
        "get",
        "-n",
        gated,
        "deployment",
        "serve",
        "-o",
        "jsonpath={.spec.strategy.rollingUpdate.maxSurge}",
    )
    assert kept.stdout.strip() == "0"
