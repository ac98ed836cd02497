"""Fluent builders for the API objects the upgrade reads (Nodes and Pods as the API's JSON),
turned into the controller's views, so table-driven tests read like the cluster they describe:

    node("p-0").driver("550.54.15").state("drain-required", since=T0).cordoned().view()
    pod("train").on("p-0").gpus(4).checkpointed(T0 - 60).view(SETTINGS)
"""

from __future__ import annotations

import copy
from typing import Any

import orjson

from controller.upgrade import states
from controller.upgrade.limits import DAYS, Window
from controller.upgrade.observe import NodeView, PodView, node_view, pod_view
from controller.upgrade.settings import PoolTarget, UpgradeSettings
from fleet import labels as keys

OLD = "550.54.15"
NEW = "570.124.06"
POOL = "p"
# Saturday 2026-11-21 12:00 UTC, Wednesday 2026-11-18 12:00 UTC.
SATURDAY_NOON = 1795003200 + 3 * 86400
WEDNESDAY_NOON = 1795003200
ALWAYS = Window(days=frozenset(DAYS), start=0, end=23 * 60 + 59)
WEEKENDS = Window(days=frozenset({"sat", "sun"}), start=0, end=23 * 60 + 59)


def settings(**changes: Any) -> UpgradeSettings:
    values: dict[str, Any] = {
        "pools": {POOL: PoolTarget(name=POOL, driver_version=NEW, max_unavailable=2)},
        "windows": (WEEKENDS,),
        "max_parallel": 10,
        "wait_for_jobs_timeout_seconds": 1800,
        "checkpoint_max_age_seconds": 900,
        "validation_timeout_seconds": 1200,
        "driver_namespace": "gpu-operator",
        "validator_namespace": "fleetplane-system",
        "validator_image": "registry.example/controller:1",
    }
    values.update(changes)
    return UpgradeSettings(**values)


SETTINGS = settings()


def _driver_labels(version: str | None) -> dict[str, str]:
    if version is None:
        return {}
    major, minor, *rest = version.split(".")
    labels = {keys.CUDA_DRIVER_MAJOR: major, keys.CUDA_DRIVER_MINOR: minor}
    if rest:
        labels[keys.CUDA_DRIVER_REV] = rest[0]
    return labels


class NodeBuilder:
    def __init__(self, name: str, pool: str = POOL) -> None:
        self.raw: dict[str, Any] = {
            "metadata": {
                "name": name,
                "resourceVersion": "1",
                "labels": {keys.POOL: pool, **_driver_labels(OLD)},
                "annotations": {},
            },
            "spec": {
                "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
            },
            "status": {
                "capacity": {"nvidia.com/gpu": "8"},
                "allocatable": {"nvidia.com/gpu": "8"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }

    def driver(self, version: str | None) -> NodeBuilder:
        labels = self.raw["metadata"]["labels"]
        for key in (keys.CUDA_DRIVER_MAJOR, keys.CUDA_DRIVER_MINOR, keys.CUDA_DRIVER_REV):
            labels.pop(key, None)
        labels.update(_driver_labels(version))
        return self

    def state(self, value: str | None, *, since: float | None = None, **detail: Any) -> NodeBuilder:
        labels = self.raw["metadata"]["labels"]
        annotations = self.raw["metadata"]["annotations"]
        if value is None:
            labels.pop(states.STATE_LABEL, None)
        else:
            labels[states.STATE_LABEL] = value
        if since is not None:
            annotations[states.SINCE_ANNOTATION] = str(int(since))
        if detail:
            current = orjson.loads(annotations.get(states.DETAIL_ANNOTATION, "{}"))
            current.update(detail)
            annotations[states.DETAIL_ANNOTATION] = orjson.dumps(current).decode()
        return self

    def cordoned(self) -> NodeBuilder:
        self.raw["spec"]["unschedulable"] = True
        return self

    def not_ready(self) -> NodeBuilder:
        self.raw["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
        return self

    def allocatable(self, gpus: int) -> NodeBuilder:
        self.raw["status"]["allocatable"]["nvidia.com/gpu"] = str(gpus)
        return self

    def view(self) -> NodeView:
        return node_view(copy.deepcopy(self.raw))


def node(name: str, pool: str = POOL) -> NodeBuilder:
    return NodeBuilder(name, pool)


class PodBuilder:
    def __init__(self, name: str, namespace: str = "team") -> None:
        self.raw: dict[str, Any] = {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{namespace}-{name}",
                "labels": {},
                "annotations": {},
            },
            "spec": {"containers": [{"name": "main", "image": "nvcr.io/x"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        }

    @property
    def _main(self) -> dict[str, Any]:
        return dict(self.raw["spec"]["containers"][0])

    def on(self, node_name: str) -> PodBuilder:
        self.raw["spec"]["nodeName"] = node_name
        return self

    def uid(self, uid: str) -> PodBuilder:
        self.raw["metadata"]["uid"] = uid
        return self

    def labels(self, **labels: str) -> PodBuilder:
        self.raw["metadata"]["labels"].update(labels)
        return self

    def gpus(self, count: int, resource: str = "nvidia.com/gpu") -> PodBuilder:
        self.raw["spec"]["containers"][0]["resources"] = {"limits": {resource: str(count)}}
        return self

    def env(self, name: str, value: str) -> PodBuilder:
        self.raw["spec"]["containers"][0].setdefault("env", []).append(
            {"name": name, "value": value}
        )
        return self

    def privileged(self) -> PodBuilder:
        self.raw["spec"]["containers"][0]["securityContext"] = {"privileged": True}
        return self

    def host_path(self, path: str) -> PodBuilder:
        self.raw["spec"].setdefault("volumes", []).append(
            {"name": "dev", "hostPath": {"path": path}}
        )
        return self

    def owned_by(self, kind: str, name: str = "owner") -> PodBuilder:
        self.raw["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": "o", "controller": True}
        ]
        return self

    def checkpointed(self, at: float | str) -> PodBuilder:
        """Epoch seconds, or the annotation's text as written (to test malformed ones)."""
        text = at if isinstance(at, str) else str(int(at))
        self.raw["metadata"]["annotations"][keys.LAST_CHECKPOINT] = text
        return self

    def deleting(self) -> PodBuilder:
        self.raw["metadata"]["deletionTimestamp"] = "2026-11-21T12:00:00Z"
        return self

    def phase(self, phase: str, *, ready: bool = True) -> PodBuilder:
        self.raw["status"]["phase"] = phase
        self.raw["status"]["conditions"] = [
            {"type": "Ready", "status": "True" if ready else "False"}
        ]
        return self

    def terminated(self, exit_code: int, message: str = "") -> PodBuilder:
        self.raw["status"]["phase"] = "Succeeded" if exit_code == 0 else "Failed"
        self.raw["status"]["containerStatuses"] = [
            {
                "name": "validate",
                "state": {"terminated": {"exitCode": exit_code, "message": message}},
            }
        ]
        return self

    def view(self, upgrade: UpgradeSettings = SETTINGS) -> PodView:
        return pod_view(copy.deepcopy(self.raw), upgrade)


def pod(name: str, namespace: str = "team") -> PodBuilder:
    return PodBuilder(name, namespace)


def driver_pod(node_name: str, uid: str, *, ready: bool = True) -> PodBuilder:
    return (
        pod(f"nvidia-driver-daemonset-{uid}", "gpu-operator")
        .on(node_name)
        .labels(app="nvidia-driver-daemonset")
        .owned_by("DaemonSet", "nvidia-driver-daemonset")
        .uid(uid)
        .phase("Running", ready=ready)
    )


def validator(node_name: str, attempt: int) -> PodBuilder:
    return (
        pod(f"fleetplane-validate-{node_name}-{attempt}", "fleetplane-system")
        .on(node_name)
        .labels(
            **{
                states.APP_NAME_LABEL: states.VALIDATOR_APP,
                states.VALIDATOR_ATTEMPT_LABEL: str(attempt),
            }
        )
        .env("NVIDIA_VISIBLE_DEVICES", "all")
    )


def verdict(
    *,
    status: str = "healthy",
    driver: str | None = NEW,
    gpus: int = 8,
    problems: list[Any] | None = None,
    reason: str | None = None,
) -> str:
    return orjson.dumps(
        {
            "status": status,
            "reason": reason,
            "healthy": status == "healthy",
            "node": "p-0",
            "driver_version": driver,
            "device_count": gpus,
            "expected": {"driver_version": NEW, "gpu_count": 8},
            "problems": problems or [],
        }
    ).decode()
