"""DRA's implicit extended resource through the real path: the pinned API server accepts a
container limit on `deviceclass.resource.kubernetes.io/gpu.nvidia.com` and calls the gate's
webhook on a real OPA, which counts it as GPUs (issue 30 item 5). Shares the gated namespace
of test_kinds_webhook (one OPA, one webhook)."""

from __future__ import annotations

from typing import Any

import pytest

from localfleet.controlplane import LocalCluster
from tests.policies.test_kinds_webhook import create, gated, template

pytestmark = pytest.mark.integration

__all__ = ["gated"]  # the fixture, imported for pytest

DRA_GPU = "deviceclass.resource.kubernetes.io/gpu.nvidia.com"


def dra_deployment(name: str, replicas: int) -> dict[str, Any]:
    pod = template(8)
    pod["metadata"]["labels"]["app"] = name
    pod["spec"]["containers"][0]["resources"] = {"limits": {DRA_GPU: "8"}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": pod,
        },
    }


def test_dra_gpus_are_counted_by_the_gate(kube: LocalCluster, gated: str) -> None:
    admitted = create(kube, gated, dra_deployment("dra-small", replicas=1))
    assert admitted.returncode == 0, admitted.stderr
    # 9 replicas x 8 GPUs through the DRA class: over the training type's maximum, as the
    # same Deployment asking for nvidia.com/gpu is (before, the gate saw no accelerator).
    refused = create(kube, gated, dra_deployment("dra-large", replicas=9))
    assert refused.returncode != 0
    assert "admission.fleetplane.dev" in refused.stderr
    assert "max-accelerators" in refused.stderr
