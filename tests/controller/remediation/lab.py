"""A health lab on the shared local control plane: a kwok GPU pool of the test's own, a real
Prometheus backfilled with dcgm-exporter series for it (the seam for the live DCGM-exporter
stand-in: `series` builds the samples, `start` hands them to `prometheus_factory`), the real
OPA, and the controller's passes driven with an injected clock.

Between passes the test plays the cloud/DCIM integration (it answers a
`fleetplane.dev/remediation-request` with `fleetplane.dev/remediation-done`) and the
validator's node (a Running validator pod gets the terminated status the real pod would
report: the real `controller.health` command line on the fake NVML, compacted as
`fleetplane controller upgrade validate` writes it).
"""

from __future__ import annotations

import copy
import io
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from controller.config import FleetView, Settings, parse_config
from controller.errors import InjectedFault
from controller.health.remedy import run_reboot
from controller.log import configure
from controller.nodeflow.validator import termination_message
from controller.observe.kube import KubeClient, object_path, pod_path
from controller.observe.metrics import Prometheus
from controller.remediation import states
from controller.remediation.observe import health_node
from controller.remediation.remedy_pods import REMEDY_ATTEMPT_LABEL
from controller.remediation.run import PassResult, run_health_pass
from controller.remediation.settings import HealthSettings, health_settings
from fleet import labels as keys
from fleet.config import load_stack_config
from fleet.project import stack_file
from fleet.render import render_opa_data
from localfleet.controlplane import LocalCluster
from localfleet.fakenodes import FakePool, fake_nodes
from localfleet.servers import OpaServer, PrometheusServer, Sample
from tests.controller.health.fake_nvml import FakeNode, FakeNvml
from tests.controller.health.test_check import main as health_main

DRIVER = "570.124.06"
T0 = 1795003200  # 2026-11-18 12:00 UTC
SCRAPE = 60
STEP = 120
LAB_TAINT_KEY = "fleetplane.dev/test-pool"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}

Series = Callable[[str, int, float], dict[str, float]]
"""(node, gpu, time) -> metric -> value at that time; a metric left out is not exported."""


def normal(node: str, gpu: int, at: float) -> dict[str, float]:
    return {
        "DCGM_FI_DEV_GPU_TEMP": 45.0,
        "DCGM_FI_DEV_POWER_USAGE": 300.0,
        "DCGM_FI_DEV_XID_ERRORS": 0.0,
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0.0,
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": 0.0,
        "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0.0,
        "DCGM_FI_DEV_ROW_REMAP_PENDING": 0.0,
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0.0,
    }


def series(
    nodes: Iterable[str], shape: Series, *, start: float, end: float, gpus: int = 8
) -> list[Sample]:
    """dcgm-exporter's samples for every GPU of `nodes`, one per scrape, labelled as it labels
    them (`gpu`, `UUID`, `device`, `modelName`, `Hostname`)."""
    out: list[Sample] = []
    for node in nodes:
        for gpu in range(gpus):
            labels = {
                "gpu": str(gpu),
                "UUID": f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node}/{gpu}')}",
                "device": f"nvidia{gpu}",
                "modelName": "NVIDIA H100 80GB HBM3",
                "Hostname": node,
            }
            at = start
            while at <= end:
                for metric, value in shape(node, gpu, at).items():
                    out.append(Sample(metric, labels, value, at))
                at += SCRAPE
    return out


def _no_signal(pid: int, signum: int) -> None:
    raise AssertionError(f"the test must never signal PID {pid} ({signum})")


def wait_for(predicate: Callable[[], Any], timeout: float = 30, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


class HealthLab:
    def __init__(
        self,
        kube: LocalCluster,
        opa: OpaServer,
        namespace: str,
        *,
        nodes: int,
        max_unavailable: int | str = "50%",
        recovery: str = "annotate",
    ) -> None:
        self.kube = kube
        self.opa = opa
        self.namespace = namespace
        self.pool = f"hl-{uuid.uuid4().hex[:6]}"
        self.names = [f"{self.pool}-{i}" for i in range(nodes)]
        self.client = KubeClient.from_kubeconfig(str(kube.kubeconfig))
        self.document = self._document(max_unavailable, recovery)
        self.prometheus: PrometheusServer | None = None
        self.logs = io.StringIO()
        self.validated: list[str] = []
        self.remediated: list[str] = []
        self.remedies: list[str] = []

    def _document(self, max_unavailable: int | str, recovery: str) -> dict[str, Any]:
        document = copy.deepcopy(render_opa_data(load_stack_config(stack_file("local"))))
        template = next(p for p in document["pools"].values() if p.get("driver_version"))
        document["pools"] = {self.pool: {**template, "model": "h100-80gb"}}
        document["health"] = {
            **document["health"],
            "max_unavailable": max_unavailable,
            "hot_for_seconds": 300,
            "signal_window_seconds": 600,
            "stale_after_seconds": 180,
            "checkpoint_window_seconds": 900,
            "checkpoint_max_age_seconds": 600,
            "recovery": recovery,
        }
        document["upgrade"] = {**document["upgrade"], "validator_namespace": self.namespace}
        document["controller"]["namespace"] = self.namespace
        document["controller"]["scrape_interval_seconds"] = SCRAPE
        return document

    @property
    def fleet(self) -> FleetView:
        return parse_config(self.document)

    @property
    def health(self) -> HealthSettings:
        return health_settings(self.fleet)

    def settings(self, **overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "prometheus_url": self.prometheus.url if self.prometheus else "http://127.0.0.1:9",
            "opa_url": self.opa.url,
            "lease_namespace": self.namespace,
            "lease_name": f"fleetplane-{self.pool}",
            "request_timeout_seconds": 10,
        }
        values.update(overrides)
        return Settings(**values)

    def start(
        self,
        prometheus_factory: Callable[[Iterable[Sample]], PrometheusServer],
        shape: Series,
        *,
        until: float = T0 + 3600,
    ) -> HealthLab:
        self.opa.put_data("fleetplane/config", self.document)
        major, minor, rev = DRIVER.split(".")
        labels = {
            keys.POOL: self.pool,
            keys.CAPACITY_TYPE: "on-demand",
            keys.GPU_PRESENT: "true",
            keys.GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3",
            keys.GPU_COUNT: "8",
            keys.CUDA_DRIVER_MAJOR: major,
            keys.CUDA_DRIVER_MINOR: minor,
            keys.CUDA_DRIVER_REV: rev,
        }
        pool = FakePool(
            name=self.pool,
            count=len(self.names),
            resource=keys.GPU_RESOURCE,
            per_node=8,
            labels=labels,
            taints=[GPU_TAINT, {"key": LAB_TAINT_KEY, "value": self.pool, "effect": "NoSchedule"}],
        )
        self.kube.create_nodes(fake_nodes([pool]))
        self.prometheus = prometheus_factory(series(self.names, shape, start=T0 - 1800, end=until))
        return self

    def stop(self) -> None:
        self.kube.kubectl("delete", "node", *self.names, "--wait=false", check=False)
        self.client.close()

    def hold(self, node: str, held: bool) -> None:
        """Cordon (or uncordon) a node as a person would, with no health mark: a spare kept out
        of placement until the test wants it."""
        self.client.merge_patch(
            object_path("v1", "nodes", None, node), {"spec": {"unschedulable": held}}
        )

    # workloads --------------------------------------------------------------------------------

    def gpu_pod(
        self, name: str, node: int, *, gpus: int = 4, annotations: dict[str, str] | None = None
    ) -> None:
        self.client.create(
            pod_path(self.namespace),
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": self.namespace,
                    "annotations": annotations or {},
                },
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": self.names[node]},
                    "tolerations": [
                        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                        {"key": LAB_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
                    ],
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "main",
                            "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                            "resources": {"limits": {keys.GPU_RESOURCE: str(gpus)}},
                        }
                    ],
                },
            },
        )

    def wait_running(self, count: int) -> None:
        def running() -> bool:
            pods = self.client.list(pod_path(self.namespace))
            return sum(p["status"].get("phase") == "Running" for p in pods) >= count

        assert wait_for(running, timeout=60), "workload pods did not start"

    def pods(self) -> set[str]:
        return {
            p["metadata"]["name"]
            for p in self.client.list(pod_path(self.namespace))
            if not p["metadata"].get("deletionTimestamp")
            and p["metadata"]["name"].startswith(states.VALIDATOR_PREFIX) is False
        }

    # the integration's and the validator node's turn ------------------------------------------

    def operator_turn(self, *, remediate: bool = True) -> None:
        for raw in self.client.list(
            "/api/v1/nodes", params={"labelSelector": f"{keys.POOL}={self.pool}"}
        ):
            annotations = raw["metadata"].get("annotations") or {}
            request_id = annotations.get(states.REQUEST_ID_ANNOTATION)
            if remediate and request_id and annotations.get(states.DONE_ANNOTATION) != request_id:
                self.remediated.append(
                    f"{raw['metadata']['name']}:{annotations.get(states.REQUEST_ANNOTATION)}"
                )
                self.client.merge_patch(
                    object_path("v1", "nodes", None, raw["metadata"]["name"]),
                    {"metadata": {"annotations": {states.DONE_ANNOTATION: request_id}}},
                )
        for raw in self.client.list(
            pod_path(self.namespace), params={"labelSelector": states.ATTEMPT_LABEL}
        ):
            statuses = (raw.get("status") or {}).get("containerStatuses") or [{}]
            if raw["metadata"].get("deletionTimestamp") or "terminated" in (
                statuses[0].get("state") or {}
            ):
                continue
            path = pod_path(self.namespace, raw["metadata"]["name"])

            def running(path: str = path) -> bool:
                return self.client.get(path)["status"].get("phase") == "Running"

            wait_for(running, timeout=20)
            self._finish_validator(raw)

    def remedy_pods(self) -> list[dict[str, Any]]:
        return [
            raw
            for raw in self.client.list(
                pod_path(self.namespace), params={"labelSelector": REMEDY_ATTEMPT_LABEL}
            )
            if not raw["metadata"].get("deletionTimestamp")
        ]

    def kubelet_turn(self, env: dict[str, str], scratch: Path) -> None:
        """What the node's kubelet does with a remedy pod (`health.recovery: act`): its command
        runs (here a child process of this package, with the stand-in nvidia-smi on PATH) and
        its exit code and termination message become the pod's terminated status."""
        for raw in self.remedy_pods():
            statuses = (raw.get("status") or {}).get("containerStatuses") or [{}]
            if "terminated" in (statuses[0].get("state") or {}):
                continue
            container = raw["spec"]["containers"][0]
            message = scratch / f"{raw['metadata']['name']}.termination-log"
            if container["command"][-1] == "reboot":
                # Never the host's own PID 1: the reboot runs against a stand-in /proc whose
                # init is not systemd, and a signal would fail the test.
                code = run_reboot(
                    node=raw["spec"]["nodeName"],
                    proc=self._init_proc(scratch),
                    kill=_no_signal,
                    termination_log=message,
                )
            else:
                code = subprocess.run(
                    [sys.executable, "-m", *container["command"], *container.get("args", [])],
                    env={
                        **os.environ,
                        **env,
                        "TERMINATION_MESSAGE_PATH": str(message),
                        "NODE_NAME": raw["spec"]["nodeName"],
                    },
                    capture_output=True,
                    text=True,
                    check=False,
                ).returncode
            self.remedies.append(f"{raw['spec']['nodeName']}:{container.get('args', [])}:{code}")
            self._terminate(raw, code, message.read_text() if message.exists() else "")

    @staticmethod
    def _init_proc(scratch: Path) -> Path:
        proc = scratch / "proc"
        (proc / "1").mkdir(parents=True, exist_ok=True)
        (proc / "1" / "comm").write_text("tini\n")
        return proc

    def _terminate(self, raw: dict[str, Any], code: int, message: str) -> None:
        container = raw["spec"]["containers"][0]
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

    def _finish_validator(self, raw: dict[str, Any]) -> None:
        node = raw["spec"]["nodeName"]
        container = raw["spec"]["containers"][0]
        out = io.StringIO()
        with redirect_stdout(out):
            code = health_main(
                ["check", *container["args"], "--node", node],
                nvml=FakeNvml(FakeNode.hgx(8).with_driver(DRIVER)),
            )
        message = termination_message(json.loads(out.getvalue()))
        self.validated.append(f"{node}:{code}")
        self._terminate(raw, code, message)

    # the controller's turn --------------------------------------------------------------------

    def run_pass(
        self, now: float, *, after_write: Callable[[str], None] | None = None, dry_run: bool = False
    ) -> PassResult | None:
        out = io.StringIO()
        configure("debug", self.logs)
        prom = Prometheus(self.prometheus.url if self.prometheus else "http://127.0.0.1:9")
        try:
            return run_health_pass(
                kube=self.client,
                fleet=self.fleet,
                settings=self.settings(dry_run=dry_run),
                health=self.health,
                now=now,
                prometheus=prom,
                after_write=after_write,
                out=out,
            )
        except InjectedFault:
            return None
        finally:
            prom.close()
            configure("info", sys.stderr)
            self.last_out = out.getvalue()

    def nodes(self) -> dict[str, Any]:
        return {
            raw["metadata"]["name"]: health_node(raw)
            for raw in self.client.list(
                "/api/v1/nodes", params={"labelSelector": f"{keys.POOL}={self.pool}"}
            )
        }

    def states(self) -> dict[str, str | None]:
        return {name: node.state for name, node in self.nodes().items()}

    def events(self, node: str) -> list[str]:
        items = self.client.list(
            "/api/v1/namespaces/default/events",
            params={"fieldSelector": f"involvedObject.kind=Node,involvedObject.name={node}"},
        )
        # in the order written: creationTimestamp has one-second resolution (two Events of one
        # pass share it), etcd's resourceVersion grows with every write
        return [
            e["reason"] for e in sorted(items, key=lambda e: int(e["metadata"]["resourceVersion"]))
        ]
