"""A driver-upgrade lab on the shared local control plane: a uniquely named kwok GPU pool of
its own, the GPU Operator played faithfully by the test, workloads, and the controller's passes
driven with an injected clock.

The test plays, between passes:

- the GPU Operator: a driver DaemonSet (`app=nvidia-driver-daemonset`, OnDelete, so only a
  deleted pod picks up the new version) and an operand DaemonSet (dcgm-exporter, which opens
  every GPU) in an operator namespace; their pods land on the kwok nodes and run;
- GPU feature discovery: once a node's driver pod is a new, Running pod, the node's
  `nvidia.com/cuda.driver.*` labels are set to that pod's version;
- the validator's node: a Running validator pod gets the terminated status the real pod would
  report, computed by running the real `controller.health` command line (the pod's own
  arguments) against the fake NVML for that node's scenario, compacted exactly as
  `fleetplane controller upgrade validate` writes it;
- a checkpointing job: pods labelled `checkpoints=true` get `fleetplane.dev/last-checkpoint`
  set to the current (injected) time.
"""

from __future__ import annotations

import copy
import io
import json
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.config import FleetView, Settings, parse_config
from controller.errors import InjectedFault
from controller.log import configure
from controller.nodeflow.consumers import Role
from controller.nodeflow.validator import termination_message
from controller.observe.kube import KubeClient, object_path, pod_path
from controller.upgrade import states
from controller.upgrade.observe import node_view, pod_view
from controller.upgrade.rollout import PassResult, run_upgrade_pass
from controller.upgrade.settings import UpgradeSettings, upgrade_settings
from fleet import labels as keys
from fleet.config import load_stack_config
from fleet.project import stack_file
from fleet.render import render_opa_data
from localfleet.controlplane import LocalCluster
from localfleet.fakenodes import FakePool, fake_nodes
from localfleet.servers import OpaServer
from tests.controller.health.fake_nvml import FakeNode, FakeNvml
from tests.controller.health.test_check import main as health_main

OLD = "550.54.15"
NEW = "570.124.06"
SATURDAY = 1795219200  # 2026-11-21 00:00 UTC
WEDNESDAY_NOON = 1795003200  # 2026-11-18 12:00 UTC
STEP = 120  # seconds of injected time per pass
WAIT_FOR_JOBS = 900
DRIVER_DS = "nvidia-driver-daemonset"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
LAB_TAINT_KEY = "fleetplane.dev/test-pool"

Scenario = Callable[[str], FakeNode]
"""The NVML a node shows, given the driver version its driver pod runs."""


def healthy(version: str) -> FakeNode:
    return FakeNode.hgx(8).with_driver(version)


def double_bit_errors(version: str) -> FakeNode:
    return FakeNode.hgx(8).with_driver(version).gpu(3, lambda g: g.with_volatile_dbe(2))


def _driver_labels(version: str) -> dict[str, str]:
    major, minor, rev = version.split(".")
    return {keys.CUDA_DRIVER_MAJOR: major, keys.CUDA_DRIVER_MINOR: minor, keys.CUDA_DRIVER_REV: rev}


def wait_for(predicate: Callable[[], Any], timeout: float = 30, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


@dataclass(kw_only=True)
class Observation:
    """The pool right after a pass (and the operator's turn)."""

    now: float
    states: dict[str, str | None]
    since: dict[str, float | None]
    unavailable: set[str]
    drivers: dict[str, str | None]
    pods: set[str]
    serve_ready: int
    refused: list[str] = field(default_factory=list)
    """Evictions a PodDisruptionBudget refused in this pass."""


@dataclass(kw_only=True)
class Watch:
    """The `after_write` hook: counts writes, checks that no driver pod is deleted while a pod
    on its node uses the GPU, and kills the run (raises) at chosen writes."""

    lab: Lab
    kill_at: set[int] = field(default_factory=set)
    writes: int = 0
    names: list[str] = field(default_factory=list)
    kills: int = 0

    def __call__(self, name: str) -> None:
        self.writes += 1
        self.names.append(name)
        if name == "upgrade.restart-driver":
            self.lab.assert_no_gpu_workload_on_restarting_nodes()
        if self.writes in self.kill_at:
            self.kills += 1
            raise InjectedFault(f"killed after write {self.writes} ({name})")


class Lab:
    def __init__(
        self,
        kube: LocalCluster,
        opa: OpaServer,
        namespace: str,
        *,
        nodes: int,
        max_unavailable: int | str,
        max_parallel: int = 10,
        scenarios: dict[int, Scenario] | None = None,
    ) -> None:
        self.kube = kube
        self.opa = opa
        self.namespace = namespace  # workloads, validators, the Lease
        self.pool = f"up-{uuid.uuid4().hex[:6]}"
        self.operator_ns = f"{self.pool}-gpu-operator"
        self.names = [f"{self.pool}-{i}" for i in range(nodes)]
        self.scenarios = {self.names[i]: s for i, s in (scenarios or {}).items()}
        self.client = KubeClient.from_kubeconfig(str(kube.kubeconfig))
        self.initial_driver_pods: dict[str, str] = {}
        self.driver_pods_seen: dict[str, list[str]] = {}
        self.validated: dict[str, list[int]] = {}
        self.document = self._document(max_unavailable, max_parallel)
        self.max_unavailable = max_unavailable
        self.logs = io.StringIO()

    # setup ------------------------------------------------------------------------------------

    def _document(self, max_unavailable: int | str, max_parallel: int) -> dict[str, Any]:
        document = copy.deepcopy(render_opa_data(load_stack_config(stack_file("local"))))
        template = next(p for p in document["pools"].values() if p.get("driver_version"))
        document["pools"] = {
            self.pool: {**template, "max_unavailable": max_unavailable, "driver_version": NEW}
        }
        document["upgrade"] = {
            "maintenance_windows": [{"days": ["sat", "sun"], "start": "00:00", "end": "23:59"}],
            "max_parallel": max_parallel,
            "drain_timeout_seconds": WAIT_FOR_JOBS,
            "checkpoint_max_age_seconds": 600,
            "validation_timeout_seconds": 1800,
            "driver_namespace": self.operator_ns,
            "validator_namespace": self.namespace,
            "xid_wait_seconds": 0,
        }
        document["controller"]["namespace"] = self.namespace
        return document

    def cli_args(self, directory: Path, now: float) -> list[str]:
        """Options for `fleetplane controller upgrade ...` against this lab."""
        config = directory / f"{self.pool}.json"
        # the lab's OPA runs without authorization: no token file to send
        document = {**self.document, "controller": {**self.document["controller"]}}
        document["controller"]["opa_token_file"] = None
        config.write_text(json.dumps(document))
        return [
            "--config",
            str(config),
            "--kubeconfig",
            str(self.kube.kubeconfig),
            "--opa-url",
            self.opa.url,
            "--lease-namespace",
            self.namespace,
            "--now",
            str(now),
        ]

    @property
    def fleet(self) -> FleetView:
        return parse_config(self.document)

    @property
    def upgrade(self) -> UpgradeSettings:
        return upgrade_settings(self.fleet)

    def settings(self, **overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "prometheus_url": "http://127.0.0.1:9",
            "opa_url": self.opa.url,
            "lease_namespace": self.namespace,
            "lease_name": f"fleetplane-{self.pool}",
            "request_timeout_seconds": 10,
        }
        values.update(overrides)
        return Settings(**values)

    def start(self) -> Lab:
        self.opa.put_data("fleetplane/config", self.document)
        taints = [GPU_TAINT, {"key": LAB_TAINT_KEY, "value": self.pool, "effect": "NoSchedule"}]
        labels = {
            keys.POOL: self.pool,
            keys.CAPACITY_TYPE: "on-demand",
            keys.GPU_PRESENT: "true",
            keys.GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3",
            keys.GPU_COUNT: "8",
            keys.DEPLOY_DRIVER: "true",
            **_driver_labels(OLD),
        }
        pool = FakePool(
            name=self.pool,
            count=len(self.names),
            resource=keys.GPU_RESOURCE,
            per_node=8,
            labels=labels,
            taints=taints,
        )
        self.kube.create_nodes(fake_nodes([pool]))
        self.kube.kubectl("create", "namespace", self.operator_ns)
        self.create(self.operator_ns, self._daemonset(DRIVER_DS, {"DRIVER_VERSION": OLD}))
        self.create(
            self.operator_ns,
            self._daemonset("nvidia-dcgm-exporter", {"NVIDIA_VISIBLE_DEVICES": "all"}),
        )
        ready = wait_for(self._all_driver_pods_running, timeout=60)
        assert ready, "driver DaemonSet pods did not come up on every lab node"
        self.initial_driver_pods = dict(ready)
        self.driver_pods_seen = {n: [uid] for n, uid in ready.items()}
        return self

    def stop(self) -> None:
        self.kube.kubectl("delete", "node", *self.names, "--wait=false", check=False)
        self.kube.kubectl("delete", "namespace", self.operator_ns, "--wait=false", check=False)
        self.client.close()

    def _daemonset(self, name: str, env: dict[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": name, "labels": {"app": name}},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "updateStrategy": {"type": "OnDelete"},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {
                        "nodeSelector": {keys.POOL: self.pool},
                        "tolerations": [{"operator": "Exists"}],
                        "containers": [
                            {
                                "name": "main",
                                "image": f"nvcr.io/nvidia/{name}:{env.get('DRIVER_VERSION', '1')}",
                                "env": [{"name": k, "value": v} for k, v in env.items()],
                            }
                        ],
                    },
                },
            },
        }

    def create(self, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        plural = {
            "DaemonSet": "daemonsets",
            "Deployment": "deployments",
            "Pod": "pods",
            "PodDisruptionBudget": "poddisruptionbudgets",
        }[obj["kind"]]
        body = copy.deepcopy(obj)
        body["metadata"]["namespace"] = namespace
        return self.client.create(object_path(obj["apiVersion"], plural, namespace, None), body)

    def roll_in(self, version: str) -> None:
        """The operator's driver version is changed (auto-upgrade off: nothing restarts)."""
        path = object_path("apps/v1", "daemonsets", self.operator_ns, DRIVER_DS)
        container = {
            "name": "main",
            "image": f"nvcr.io/nvidia/{DRIVER_DS}:{version}",
            "env": [{"name": "DRIVER_VERSION", "value": version}],
        }
        self.client.merge_patch(path, {"spec": {"template": {"spec": {"containers": [container]}}}})

    def toleration(self) -> list[dict[str, Any]]:
        return [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": LAB_TAINT_KEY, "operator": "Equal", "value": self.pool, "effect": "NoSchedule"},
        ]

    def gpu_pod(
        self,
        name: str,
        node: int,
        *,
        gpus: int = 0,
        env: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        container: dict[str, Any] = {"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3"}
        if gpus:
            container["resources"] = {"limits": {keys.GPU_RESOURCE: str(gpus)}}
        if env:
            container["env"] = [{"name": k, "value": v} for k, v in env.items()]
        return self.create(
            self.namespace,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "labels": labels or {}},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": self.names[node]},
                    "tolerations": self.toleration(),
                    "terminationGracePeriodSeconds": 0,
                    "containers": [container],
                },
            },
        )

    def wait_running(self, count: int) -> None:
        def running() -> bool:
            pods = self.client.list(pod_path(self.namespace))
            return sum(p["status"].get("phase") == "Running" for p in pods) >= count

        assert wait_for(running, timeout=60), "workload pods did not start"

    # the operator's turn ----------------------------------------------------------------------

    def _driver_pods(self) -> list[dict[str, Any]]:
        return self.client.list(
            pod_path(self.operator_ns), params={"labelSelector": f"app={DRIVER_DS}"}
        )

    def _all_driver_pods_running(self) -> dict[str, str] | None:
        found: dict[str, str] = {}
        for raw in self._driver_pods():
            if raw["metadata"].get("deletionTimestamp"):
                return None
            if raw["status"].get("phase") != "Running":
                return None
            found[raw["spec"]["nodeName"]] = raw["metadata"]["uid"]
        return found if set(found) == set(self.names) else None

    def operator_turn(self, now: float) -> None:
        """Let the cluster settle, then play GFD, the validator's node and checkpointing."""
        wait_for(self._settled, timeout=15)
        for raw in self._driver_pods():
            node = raw["spec"]["nodeName"]
            uid = raw["metadata"]["uid"]
            if raw["status"].get("phase") != "Running" or raw["metadata"].get("deletionTimestamp"):
                continue
            if uid not in self.driver_pods_seen[node]:
                self.driver_pods_seen[node].append(uid)
            version = raw["spec"]["containers"][0]["env"][0]["value"]
            labels = self.client.get(object_path("v1", "nodes", None, node))["metadata"]["labels"]
            if labels.get(keys.CUDA_DRIVER_MAJOR) != version.split(".")[0]:
                self.client.merge_patch(
                    object_path("v1", "nodes", None, node),
                    {"metadata": {"labels": _driver_labels(version)}},
                )
        for raw in self.client.list(
            pod_path(self.namespace),
            params={"labelSelector": f"{states.APP_NAME_LABEL}={states.VALIDATOR_APP}"},
        ):
            if raw["status"].get("phase") == "Running" and not raw["metadata"].get(
                "deletionTimestamp"
            ):
                self._finish_validator(raw)
        for raw in self.client.list(
            pod_path(self.namespace), params={"labelSelector": "checkpoints=true"}
        ):
            self.client.merge_patch(
                pod_path(self.namespace, raw["metadata"]["name"]),
                {"metadata": {"annotations": {keys.LAST_CHECKPOINT: str(int(now))}}},
            )

    def _settled(self) -> bool:
        """Nothing pending or terminating in the lab: replacements scheduled, evictions done."""
        for namespace in (self.namespace, self.operator_ns):
            for raw in self.client.list(pod_path(namespace)):
                if raw["metadata"].get("deletionTimestamp"):
                    return False
                if raw["status"].get("phase") == "Pending" and raw["spec"].get("nodeName"):
                    return False
        return self._all_driver_pods_running() is not None

    def _finish_validator(self, raw: dict[str, Any]) -> None:
        node = raw["spec"]["nodeName"]
        driver = next(
            p["spec"]["containers"][0]["env"][0]["value"]
            for p in self._driver_pods()
            if p["spec"]["nodeName"] == node and not p["metadata"].get("deletionTimestamp")
        )
        scenario = self.scenarios.get(node, healthy)
        container = raw["spec"]["containers"][0]
        assert container["command"] == ["fleetplane", "controller", "upgrade", "validate"]
        out = io.StringIO()
        with redirect_stdout(out):
            code = health_main(
                ["check", *container["args"], "--node", node], nvml=FakeNvml(scenario(driver))
            )
        message = termination_message(json.loads(out.getvalue()))
        self.validated.setdefault(node, []).append(code)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.client.merge_patch(
            pod_path(raw["metadata"]["namespace"], raw["metadata"]["name"]) + "/status",
            {
                "status": {
                    "phase": "Succeeded" if code == 0 else "Failed",
                    "containerStatuses": [
                        {
                            "name": container["name"],
                            "image": container["image"],
                            "imageID": "",
                            "ready": False,
                            "restartCount": 0,
                            "state": {
                                "terminated": {
                                    "exitCode": code,
                                    "reason": "Completed" if code == 0 else "Error",
                                    "message": message,
                                    "startedAt": stamp,
                                    "finishedAt": stamp,
                                }
                            },
                        }
                    ],
                }
            },
        )

    # the controller's turn --------------------------------------------------------------------

    def run_pass(
        self, now: float, *, watch: Watch | None = None, dry_run: bool = False
    ) -> PassResult | None:
        """One pass; None when the watch killed it."""
        out = io.StringIO()
        configure("debug", self.logs)
        try:
            return run_upgrade_pass(
                kube=self.client,
                fleet=self.fleet,
                settings=self.settings(dry_run=dry_run),
                upgrade=self.upgrade,
                now=now,
                after_write=watch,
                out=out,
            )
        except InjectedFault:
            return None
        finally:
            configure("info", sys.stderr)
            self.last_out = out.getvalue()

    def observe(self, now: float) -> Observation:
        views = {
            raw["metadata"]["name"]: node_view(raw)
            for raw in self.client.list(
                "/api/v1/nodes", params={"labelSelector": f"{keys.POOL}={self.pool}"}
            )
        }
        pods = self.client.list(pod_path(self.namespace))
        serve_ready = sum(
            1
            for p in pods
            if p["metadata"].get("labels", {}).get("app") == "serve"
            and not p["metadata"].get("deletionTimestamp")
            and any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in p["status"].get("conditions") or ()
            )
        )
        return Observation(
            now=now,
            states={n: v.state for n, v in views.items()},
            since={n: v.since for n, v in views.items()},
            unavailable={n for n, v in views.items() if v.unschedulable or not v.ready},
            drivers={n: v.driver for n, v in views.items()},
            pods={
                p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")
            },
            serve_ready=serve_ready,
        )

    def assert_no_gpu_workload_on_restarting_nodes(self) -> None:
        upgrade = self.upgrade
        for raw in self.client.list(
            "/api/v1/nodes", params={"labelSelector": f"{keys.POOL}={self.pool}"}
        ):
            view = node_view(raw)
            if view.state not in (states.DRIVER_RESTART_REQUIRED, states.VALIDATION_REQUIRED):
                continue
            on_node = [
                pod_view(p, upgrade)
                for p in self.client.list(
                    "/api/v1/pods", params={"fieldSelector": f"spec.nodeName={view.name}"}
                )
            ]
            users = [
                p.key
                for p in on_node
                if p.gpu and p.active and p.role in (Role.WORKLOAD, Role.DAEMONSET, Role.STATIC)
            ]
            assert not users, f"driver restarted on {view.name} while {users} use the GPU"

    def driver_restarts(self) -> dict[str, int]:
        return {node: len(uids) - 1 for node, uids in self.driver_pods_seen.items()}

    def events(self, node: str) -> list[str]:
        items = self.client.list(
            "/api/v1/namespaces/default/events",
            params={"fieldSelector": f"involvedObject.kind=Node,involvedObject.name={node}"},
        )
        return [
            e["reason"] for e in sorted(items, key=lambda e: int(e["metadata"]["resourceVersion"]))
        ]
