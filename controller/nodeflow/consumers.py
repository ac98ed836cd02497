"""Who holds the GPU on a node, and what the rollout may do about each pod. Pure: reads the
API's JSON of a pod.

A pod uses the node's GPUs when any of its running containers (regular, sidecar or ephemeral)

1. requests or limits `nvidia.com/gpu` or a MIG resource (`nvidia.com/mig-*`);
2. sets `NVIDIA_VISIBLE_DEVICES` to anything but `void`, `none` or empty (`all`, indexes,
   UUIDs; a value taken from elsewhere, `valueFrom`, counts too): the NVIDIA runtime hands such a
   container the devices without any request;
3. mounts a hostPath under `/dev/nvidia` (the device nodes themselves);
4. or the pod claims devices through dynamic resource allocation (`spec.resourceClaims`).

For pods that are not DaemonSet or static pods, two broader signs count as well, because on a
GPU node they can open the devices: a privileged container, and a hostPath of `/dev`. They are
not applied to DaemonSet and static pods, where they are the norm for CNI, CSI and monitoring
agents that never touch a GPU: those would otherwise block every driver restart.

Roles decide what the rollout does (see README, "Who holds the GPU"):

- `driver`: the GPU Operator's driver pod for the node; restarted by the rollout.
- `validator`: the rollout's own validator pod.
- `operand`: any other DaemonSet pod in the GPU Operator's namespace (device plugin, GFD, DCGM,
  dcgm-exporter, MIG manager, container toolkit, operator validator). The driver pod's
  k8s-driver-manager stops them before it unloads the kernel module and they come back with the
  new driver, so they never block the restart and are never evicted.
- `daemonset` and `static`: other DaemonSet pods and static (mirror) pods. Never evicted (a
  DaemonSet recreates its pod on a cordoned node at once; a static pod cannot be evicted); one
  that uses the GPU blocks the driver restart until it is gone.
- `workload`: everything else; one that uses the GPU is waited for, then evicted.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Protocol

from controller.nodeflow.keys import APP_NAME_LABEL, VALIDATOR_APP
from fleet import labels as keys

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
NO_DEVICES = frozenset({"", "void", "none"})

SERVICE_OWNERS = frozenset({"ReplicaSet", "StatefulSet"})
"""Owners whose pods are replicas of a service: their controller starts them elsewhere, so they
are evicted at once (their PodDisruptionBudget decides how fast) instead of waited for."""


class LabelSelector(Protocol):
    """What recognising the driver pods needs of a selector (`controller.nodeflow.selectors`)."""

    def matches(self, labels: dict[str, str]) -> bool: ...


class Role(StrEnum):
    DRIVER = "driver"
    VALIDATOR = "validator"
    OPERAND = "operand"
    DAEMONSET = "daemonset"
    STATIC = "static"
    WORKLOAD = "workload"


def controller_kind(metadata: dict[str, Any]) -> str | None:
    for ref in metadata.get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref.get("kind") or "")
    return None


def pod_role(raw: dict[str, Any], *, driver_namespace: str, driver_selector: LabelSelector) -> Role:
    metadata = raw.get("metadata") or {}
    labels = metadata.get("labels") or {}
    namespace = metadata.get("namespace")
    owner = controller_kind(metadata)
    if labels.get(APP_NAME_LABEL) == VALIDATOR_APP:
        return Role.VALIDATOR
    if namespace == driver_namespace and driver_selector.matches(labels):
        return Role.DRIVER
    if owner == "DaemonSet":
        return Role.OPERAND if namespace == driver_namespace else Role.DAEMONSET
    if owner == "Node" or MIRROR_ANNOTATION in (metadata.get("annotations") or {}):
        return Role.STATIC
    return Role.WORKLOAD


def _running_containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    sidecars = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    return [
        *(spec.get("containers") or ()),
        *sidecars,
        *(spec.get("ephemeralContainers") or ()),
    ]


def gpu_use(raw: dict[str, Any], *, broad: bool) -> str | None:
    """Why the pod counts as using the GPU (None when it does not). `broad` adds privileged
    containers and a `/dev` hostPath (used for pods that are neither DaemonSet nor static)."""
    spec = raw.get("spec") or {}
    for container in _running_containers(spec):
        name = container.get("name", "")
        resources = container.get("resources") or {}
        for source in (resources.get("limits") or {}, resources.get("requests") or {}):
            for resource, quantity in source.items():
                gpu = resource == keys.GPU_RESOURCE or resource.startswith(keys.MIG_RESOURCE_PREFIX)
                if gpu and str(quantity) not in ("0", ""):
                    return f"container {name} requests {resource}: {quantity}"
        for env in container.get("env") or ():
            if env.get("name") != "NVIDIA_VISIBLE_DEVICES":
                continue
            if "valueFrom" in env:
                return f"container {name} sets NVIDIA_VISIBLE_DEVICES from elsewhere"
            value = str(env.get("value") or "").strip().lower()
            if value not in NO_DEVICES:
                return f"container {name} sets NVIDIA_VISIBLE_DEVICES={env.get('value')}"
        if broad and (container.get("securityContext") or {}).get("privileged") is True:
            return f"container {name} is privileged"
    for volume in spec.get("volumes") or ():
        path = ((volume.get("hostPath") or {}).get("path") or "").rstrip("/")
        if path.startswith("/dev/nvidia"):
            return f"mounts host path {path}"
        if broad and path == "/dev":
            return "mounts host path /dev"
    if spec.get("resourceClaims"):
        return "claims devices through dynamic resource allocation"
    return None


def uses_gpu(raw: dict[str, Any], role: Role) -> str | None:
    if role in (Role.DRIVER, Role.VALIDATOR, Role.OPERAND):
        return None  # restarted with (or by) the driver; never a blocker
    return gpu_use(raw, broad=role is Role.WORKLOAD)
