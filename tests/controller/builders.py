"""Fluent builders for controller test fixtures: API-shaped pods and nodes, the configuration
document, DCGM evidence, and a want/got diff assertion."""

from __future__ import annotations

import copy
import difflib
import pprint
import uuid
from typing import Any

from controller.config import FleetView, parse_config
from controller.observe.metrics import GpuSeries, PodEvidence
from controller.observe.model import Node, Pod, format_time, node_from_api, pod_from_api
from fleet import labels as keys

NOW = 1_795_000_000.0  # 2026-11-18T11:06:40Z
H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-40GB"
GPU_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
SPOT_TOLERATIONS = [
    *GPU_TOLERATIONS,
    {"key": "fleetplane.dev/capacity-type", "operator": "Exists", "effect": "NoSchedule"},
]


def assert_same(want: Any, got: Any, what: str = "") -> None:
    """Equality with a want/got diff in the failure message."""
    if want == got:
        return
    diff = "\n".join(
        difflib.unified_diff(
            pprint.pformat(want, width=100).splitlines(),
            pprint.pformat(got, width=100).splitlines(),
            "want",
            "got",
            lineterm="",
        )
    )
    raise AssertionError(f"{what} differs (-want +got):\n{diff}")


# --- configuration ----------------------------------------------------------------------------


def config_document() -> dict[str, Any]:
    """The contract's example document (docs/contracts.md), with two teams."""
    idle = {"util_threshold_percent": 5, "window_seconds": 3600, "grace_seconds": 1800}
    return {
        "namespaces": {"ml-research": "research", "analytics": "analytics"},
        "teams": {
            "research": {
                "namespaces": ["ml-research"],
                "monthly_budget_usd": 50000,
                "guaranteed": {"nvidia.com/gpu": 16, "google.com/tpu": 0},
                "quota": {"nvidia.com/gpu": 64, "google.com/tpu": 16},
            },
            "analytics": {
                "namespaces": ["analytics"],
                "monthly_budget_usd": 5000,
                "guaranteed": {"nvidia.com/gpu": 2, "google.com/tpu": 0},
                "quota": {"nvidia.com/gpu": 16, "google.com/tpu": 0},
            },
        },
        "models": {
            "h100-80gb": {
                "resource": "nvidia.com/gpu",
                "node_label": keys.GPU_PRODUCT,
                "label_value": H100,
                "price_per_hour_usd": {"on-demand": 12.29, "spot": 3.93},
            },
            "a100-40gb": {
                "resource": "nvidia.com/gpu",
                "node_label": keys.GPU_PRODUCT,
                "label_value": A100,
                "price_per_hour_usd": {"on-demand": 4.1, "spot": 1.23},
            },
            "tpu-v5e": {
                "resource": "google.com/tpu",
                "node_label": keys.TPU_ACCELERATOR,
                "label_value": "tpu-v5-lite-podslice",
                "price_per_hour_usd": {"on-demand": 1.2, "spot": 0.48},
            },
        },
        "workload_types": {
            "training": {"preemptible": True, "min_runtime_seconds": 600, "idle": dict(idle)},
            "inference": {"preemptible": False, "min_runtime_seconds": 0, "idle": None},
            "notebook": {
                "preemptible": True,
                "min_runtime_seconds": 0,
                "idle": {"util_threshold_percent": 1, "window_seconds": 1800, "grace_seconds": 900},
            },
            "batch": {"preemptible": True, "min_runtime_seconds": 0, "idle": dict(idle)},
        },
        "budget": {"warn_ratio": 0.8, "deny_ratio": 1.0},
        "controller": {
            "prometheus_url": "http://127.0.0.1:9",
            "opa_url": "http://127.0.0.1:9",
            "preemption_pending_seconds": 600,
        },
    }


def fleet(mutate: Any = None) -> FleetView:
    document = copy.deepcopy(config_document())
    if mutate is not None:
        mutate(document)
    return parse_config(document)


# --- pods -------------------------------------------------------------------------------------


class PodBuilder:
    """`a_pod("nb").in_ns("ml-research").gpus(1).type("notebook").on("h100-0").build()`"""

    def __init__(self, name: str) -> None:
        self._raw: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "ml-research",
                "uid": str(uuid.uuid5(uuid.NAMESPACE_OID, name)),
                "resourceVersion": "1",
                "creationTimestamp": format_time(NOW - 86400),
                "labels": {},
                "annotations": {},
            },
            "spec": {"containers": [{"name": "main", "image": "nvcr.io/x", "resources": {}}]},
            "status": {"phase": "Pending"},
        }

    @property
    def _meta(self) -> dict[str, Any]:
        return self._raw["metadata"]

    def in_ns(self, namespace: str) -> PodBuilder:
        self._meta["namespace"] = namespace
        return self

    def uid(self, uid: str) -> PodBuilder:
        self._meta["uid"] = uid
        return self

    def label(self, key: str, value: str) -> PodBuilder:
        self._meta["labels"][key] = value
        return self

    def annotate(self, key: str, value: str) -> PodBuilder:
        self._meta["annotations"][key] = value
        return self

    def type(self, workload_type: str) -> PodBuilder:
        return self.label(keys.WORKLOAD_TYPE, workload_type)

    def exempt(self) -> PodBuilder:
        return self.label(keys.EXEMPT, "true")

    def preemptible(self, value: bool) -> PodBuilder:
        return self.label(keys.PREEMPTIBLE, "true" if value else "false")

    def resource(self, resource: str, count: int) -> PodBuilder:
        limits = self._raw["spec"]["containers"][0]["resources"].setdefault("limits", {})
        limits[resource] = str(count)
        return self

    def gpus(self, count: int) -> PodBuilder:
        return self.resource("nvidia.com/gpu", count)

    def tpus(self, count: int) -> PodBuilder:
        return self.resource("google.com/tpu", count)

    def priority(self, value: int) -> PodBuilder:
        self._raw["spec"]["priority"] = value
        return self

    def on(self, node: str, *, started: float = NOW - 7200) -> PodBuilder:
        self._raw["spec"]["nodeName"] = node
        self._raw["status"]["phase"] = "Running"
        self._raw["status"]["startTime"] = format_time(started)
        return self

    def finished(self, at: float) -> PodBuilder:
        self._raw["status"]["phase"] = "Succeeded"
        self._raw["status"]["containerStatuses"] = [
            {"name": "main", "state": {"terminated": {"finishedAt": format_time(at)}}}
        ]
        return self

    def deleting(self) -> PodBuilder:
        self._meta["deletionTimestamp"] = format_time(NOW)
        return self

    def pending(self, since: float) -> PodBuilder:
        self._raw["spec"].pop("nodeName", None)
        self._raw["status"] = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "lastTransitionTime": format_time(since),
                }
            ],
        }
        return self

    def tolerate(self, tolerations: list[dict[str, str]]) -> PodBuilder:
        self._raw["spec"]["tolerations"] = copy.deepcopy(tolerations)
        return self

    def select(self, **labels: str) -> PodBuilder:
        self._raw["spec"]["nodeSelector"] = dict(labels)
        return self

    def warned(self, at: float, deadline: float) -> PodBuilder:
        return self.annotate(keys.IDLE_WARNED_AT, str(int(at))).annotate(
            keys.RECLAIM_DEADLINE, str(int(deadline))
        )

    def checkpoint(self, at: float) -> PodBuilder:
        return self.annotate(keys.LAST_CHECKPOINT, str(int(at)))

    def owned_by(self, kind: str, name: str, api_version: str = "apps/v1") -> PodBuilder:
        self._meta["ownerReferences"] = [
            {
                "apiVersion": api_version,
                "kind": kind,
                "name": name,
                "uid": "o-" + name,
                "controller": True,
            }
        ]
        return self

    def of_deployment(self, name: str, template_hash: str = "5d8f7c") -> PodBuilder:
        return self.owned_by("ReplicaSet", f"{name}-{template_hash}").label(
            "pod-template-hash", template_hash
        )

    def raw(self) -> dict[str, Any]:
        return copy.deepcopy(self._raw)

    def build(self) -> Pod:
        return pod_from_api(self.raw())


def a_pod(name: str) -> PodBuilder:
    return PodBuilder(name)


# --- nodes ------------------------------------------------------------------------------------


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._raw: dict[str, Any] = {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"taints": []},
            "status": {
                "allocatable": {"cpu": "96"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }

    def gpus(self, count: int, product: str = H100) -> NodeBuilder:
        self._raw["status"]["allocatable"]["nvidia.com/gpu"] = str(count)
        self._raw["metadata"]["labels"][keys.GPU_PRODUCT] = product
        self._raw["spec"]["taints"].append(dict(keys.GPU_TAINT))
        return self.capacity("on-demand")

    def tpus(self, count: int) -> NodeBuilder:
        self._raw["status"]["allocatable"]["google.com/tpu"] = str(count)
        self._raw["metadata"]["labels"][keys.TPU_ACCELERATOR] = "tpu-v5-lite-podslice"
        return self.capacity("on-demand")

    def capacity(self, capacity_type: str) -> NodeBuilder:
        self._raw["metadata"]["labels"][keys.CAPACITY_TYPE] = capacity_type
        return self

    def spot(self) -> NodeBuilder:
        self._raw["spec"]["taints"].append(dict(keys.SPOT_TAINT))
        return self.capacity("spot")

    def label(self, key: str, value: str) -> NodeBuilder:
        self._raw["metadata"]["labels"][key] = value
        return self

    def not_ready(self) -> NodeBuilder:
        self._raw["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
        return self

    def build(self) -> Node:
        return node_from_api(copy.deepcopy(self._raw))


def a_node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


# --- evidence ---------------------------------------------------------------------------------


def gpu_series(
    hostname: str,
    gpu: str = "0",
    *,
    samples: int = 120,
    util: float = 0.0,
    engine: float | None = None,
    fb: float = 2048.0,
    fb_min: float | None = None,
) -> GpuSeries:
    return GpuSeries(
        hostname=hostname,
        gpu=gpu,
        util_samples=samples,
        max_util_percent=util,
        max_engine_active=engine,
        fb_samples=samples,
        max_fb_used_mib=fb,
        min_fb_used_mib=fb if fb_min is None else fb_min,
    )


def evidence(window: int, *series: GpuSeries) -> PodEvidence:
    return PodEvidence(window_seconds=window, gpus={(s.hostname, s.gpu): s for s in series})
