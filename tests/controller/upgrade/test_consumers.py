"""Who holds the GPU: every way a pod can use it, and which pods block or are left alone."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from controller.nodeflow.consumers import Role
from tests.controller.upgrade.builders import PodBuilder, driver_pod, pod, validator


@dataclass(frozen=True)
class Case:
    name: str
    pod: PodBuilder
    role: Role
    uses_gpu: bool


CASES = [
    Case("GPU request", pod("a").gpus(2), Role.WORKLOAD, True),
    Case("MIG request", pod("a").gpus(1, "nvidia.com/mig-1g.10gb"), Role.WORKLOAD, True),
    Case("zero GPUs", pod("a").gpus(0), Role.WORKLOAD, False),
    Case("CPU only", pod("a"), Role.WORKLOAD, False),
    Case(
        "NVIDIA_VISIBLE_DEVICES=all",
        pod("a").env("NVIDIA_VISIBLE_DEVICES", "all"),
        Role.WORKLOAD,
        True,
    ),
    Case(
        "NVIDIA_VISIBLE_DEVICES=0,1",
        pod("a").env("NVIDIA_VISIBLE_DEVICES", "0,1"),
        Role.WORKLOAD,
        True,
    ),
    Case(
        "NVIDIA_VISIBLE_DEVICES=GPU-uuid",
        pod("a").env("NVIDIA_VISIBLE_DEVICES", "GPU-1a2b"),
        Role.WORKLOAD,
        True,
    ),
    Case(
        "NVIDIA_VISIBLE_DEVICES=void",
        pod("a").env("NVIDIA_VISIBLE_DEVICES", "void"),
        Role.WORKLOAD,
        False,
    ),
    Case(
        "NVIDIA_VISIBLE_DEVICES=none",
        pod("a").env("NVIDIA_VISIBLE_DEVICES", "none"),
        Role.WORKLOAD,
        False,
    ),
    Case("privileged workload", pod("a").privileged(), Role.WORKLOAD, True),
    Case("/dev/nvidia0 host path", pod("a").host_path("/dev/nvidia0"), Role.WORKLOAD, True),
    Case("/dev host path, workload", pod("a").host_path("/dev"), Role.WORKLOAD, True),
    Case(
        "replica of a Deployment with a GPU",
        pod("a").gpus(1).owned_by("ReplicaSet"),
        Role.WORKLOAD,
        True,
    ),
    Case(
        "privileged DaemonSet (CNI)",
        pod("cni").privileged().owned_by("DaemonSet"),
        Role.DAEMONSET,
        False,
    ),
    Case(
        "DaemonSet with /dev (CSI)",
        pod("csi").host_path("/dev").owned_by("DaemonSet"),
        Role.DAEMONSET,
        False,
    ),
    Case(
        "third-party DaemonSet with NVIDIA_VISIBLE_DEVICES",
        pod("dcgm", "monitoring").env("NVIDIA_VISIBLE_DEVICES", "all").owned_by("DaemonSet"),
        Role.DAEMONSET,
        True,
    ),
    Case(
        "DaemonSet mounting /dev/nvidiactl",
        pod("agent", "monitoring").host_path("/dev/nvidiactl").owned_by("DaemonSet"),
        Role.DAEMONSET,
        True,
    ),
    Case(
        "GPU Operator operand (dcgm-exporter) restarts with the driver",
        pod("nvidia-dcgm-exporter-x", "gpu-operator")
        .env("NVIDIA_VISIBLE_DEVICES", "all")
        .owned_by("DaemonSet"),
        Role.OPERAND,
        False,
    ),
    Case(
        "GPU Operator device plugin restarts with the driver",
        pod("nvidia-device-plugin-x", "gpu-operator").privileged().owned_by("DaemonSet"),
        Role.OPERAND,
        False,
    ),
    Case("the driver pod", driver_pod("p-0", "d1"), Role.DRIVER, False),
    Case("the validator", validator("p-0", 1), Role.VALIDATOR, False),
    Case(
        "static pod with a GPU",
        pod("static", "kube-system").gpus(1).owned_by("Node"),
        Role.STATIC,
        True,
    ),
    Case(
        "non-DaemonSet pod in the operator's namespace is a workload",
        pod("debug", "gpu-operator").env("NVIDIA_VISIBLE_DEVICES", "all"),
        Role.WORKLOAD,
        True,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gpu_consumers(case: Case) -> None:
    view = case.pod.view()
    assert (view.role, view.gpu is not None) == (case.role, case.uses_gpu), view.gpu


def test_env_from_elsewhere_counts() -> None:
    builder = pod("a")
    builder.raw["spec"]["containers"][0]["env"] = [
        {
            "name": "NVIDIA_VISIBLE_DEVICES",
            "valueFrom": {"configMapKeyRef": {"name": "x", "key": "y"}},
        }
    ]
    assert builder.view().gpu == "container main sets NVIDIA_VISIBLE_DEVICES from elsewhere"


def test_sidecar_and_finished_init_containers() -> None:
    sidecar = pod("a")
    sidecar.raw["spec"]["initContainers"] = [
        {
            "name": "side",
            "restartPolicy": "Always",
            "resources": {"limits": {"nvidia.com/gpu": "1"}},
        }
    ]
    assert sidecar.view().gpu is not None
    init = pod("b")
    init.raw["spec"]["initContainers"] = [
        {"name": "init", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    ]
    assert init.view().gpu is None  # done before the pod runs


def test_dynamic_resource_claims_count() -> None:
    builder = pod("a")
    builder.raw["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "c"}]
    assert builder.view().gpu == "claims devices through dynamic resource allocation"
