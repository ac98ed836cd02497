"""The operators' kinds judged whole through the real path: the pinned API server calls the
gate's webhook (its rules as `components.policy_gate.webhook_rules` generates them from the
fleet configuration) on a real OPA over HTTPS, with the project's policies and the policy
tests' configuration. A JobSet and a RayCluster within limits are admitted; one over the
training type's max-accelerators as a whole (every replicated job, every worker group up to
its autoscaling bound) is refused with the gate's message.

The CRDs are minimal ones of the operators' groups and kinds (the gate reads the objects as
the API server sends them; the operators' own CRDs and processes are the local fleet's, issue 30
item 2), so the API server keeps every field the test writes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from localfleet.controlplane import LocalCluster
from tests.policies.webhook_gate import create, gated_namespace

__all__ = ["create"]  # test_dra_webhook sends its objects with it

pytestmark = pytest.mark.integration

H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def crd(group: str, version: str, kind: str, plural: str) -> dict[str, Any]:
    """A namespaced CRD keeping every field (a structural schema that preserves unknowns)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


def template(gpus: int, workload_type: str = "training") -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return {
        "metadata": {
            "labels": {"fleetplane.dev/workload-type": workload_type},
            "annotations": {"scheduling.volcano.sh/queue-name": "research"},
        },
        "spec": {
            "priorityClassName": "fleetplane-training",
            **({"nodeSelector": H100} if gpus else {}),
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "resources": {"limits": limits},
                }
            ],
        },
    }


def jobset(name: str, jobs: int, parallelism: int) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": jobs,
                    "template": {
                        "spec": {
                            "parallelism": parallelism,
                            "completions": parallelism,
                            "backoffLimit": 0,
                            "template": template(8),
                        }
                    },
                }
            ]
        },
    }


def raycluster(name: str, max_replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {
            "enableInTreeAutoscaling": True,
            "headGroupSpec": {"template": template(0)},
            "workerGroupSpecs": [
                {
                    "groupName": "gpu",
                    "replicas": 1,
                    "minReplicas": 0,
                    "maxReplicas": max_replicas,
                    "template": template(8),
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def gated(kube: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A team namespace of its own behind the gate's webhook on a real OPA over HTTPS
    (tests/policies/webhook_gate.py), with the operators' CRDs."""
    kube.apply(
        [
            crd("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"),
            crd("ray.io", "v1", "RayCluster", "rayclusters"),
        ]
    )
    for plural in ("jobsets.jobset.x-k8s.io", "rayclusters.ray.io"):
        kube.kubectl("wait", "--for=condition=Established", f"crd/{plural}", "--timeout=30s")
    with gated_namespace(kube, tmp_path_factory.mktemp("kinds-gate"), "kinds") as namespace:
        yield namespace


def test_a_jobset_is_judged_whole(kube: LocalCluster, gated: str) -> None:
    admitted = create(kube, gated, jobset("small", jobs=2, parallelism=1))
    assert admitted.returncode == 0, admitted.stderr
    # 5 Jobs x 2 pods x 8 GPUs: each pod is within limits, the whole is not.
    refused = create(kube, gated, jobset("large", jobs=5, parallelism=2))
    assert refused.returncode != 0
    assert "admission.fleetplane.dev" in refused.stderr
    assert "max-accelerators: the workload holds 80 accelerators at once" in refused.stderr


def test_a_raycluster_is_judged_up_to_its_autoscaling_bound(kube: LocalCluster, gated: str) -> None:
    admitted = create(kube, gated, raycluster("small", max_replicas=3))
    assert admitted.returncode == 0, admitted.stderr
    # One replica now, but Ray's autoscaler may grow the group to 9 x 8 GPUs.
    refused = create(kube, gated, raycluster("large", max_replicas=9))
    assert refused.returncode != 0
    assert "max-accelerators: the workload holds 72 accelerators at once" in refused.stderr


def test_a_user_written_owner_reference_is_refused(kube: LocalCluster, gated: str) -> None:
    forged = jobset("forged", jobs=1, parallelism=1)
    forged["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "someone-elses",
            "uid": str(uuid.uuid4()),
            "controller": True,
        }
    ]
    refused = create(kube, gated, forged)
    assert refused.returncode != 0
    assert "owner-reference: metadata.ownerReferences[0] names Job" in refused.stderr
