"""Helpers for the controller's integration tests: a `harness` bound to the test's namespace,
the real OPA (policies + a configuration document mapping the namespace to team `research`)
and the local control plane; DCGM sample builders for `prometheus_factory`."""

from __future__ import annotations

import copy
import io
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.config import Settings, parse_config
from controller.decide.spend import Accumulator
from controller.log import configure
from controller.observe.kube import KubeClient, namespace_path, object_path, pod_path
from controller.reconcile import CONCERNS, Hooks, run_pass
from controller.summary import Summary
from fleet.config import load_stack_config
from fleet.project import stack_file
from fleet.render import render_opa_data
from localfleet.controlplane import LocalCluster, free_port
from localfleet.servers import OpaServer, Sample
from policyreview.diff import CORPUS_DIR

GPU_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
SCRAPE = 30  # seconds between DCGM samples in these tests
WINDOW = 600  # idle window of every reclaimable type in these tests
GRACE = 300
GPU_IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


HARNESS_CONCERNS = tuple(c for c in CONCERNS if c != "admission")
"""What the harness's passes run by default: the shared OPA serves every test, and the
admission documents (reservations above all) would carry one test's workloads into the next
one's budget; tests/controller/test_admission_data.py runs that concern on an OPA of its own."""


def closed_url() -> str:
    """A loopback URL nothing listens on."""
    return f"http://127.0.0.1:{free_port()}"


def config_for(namespace: str) -> dict[str, Any]:
    """The local stack's rendered document, with the test namespace as team `research`'s only
    namespace and short idle windows."""
    document = copy.deepcopy(render_opa_data(load_stack_config(stack_file("local"))))
    for team in document["teams"].values():
        team["namespaces"] = [ns for ns in team["namespaces"] if ns != namespace]
    document["namespaces"] = {
        ns: team for ns, team in document["namespaces"].items() if team != "research"
    }
    document["namespaces"][namespace] = "research"
    document["teams"]["research"]["namespaces"] = [namespace]
    # the tests' shared OPA runs without authorization (tests load data through its API);
    # tests/controller/test_opa_authorization.py runs the controller against one that has it
    document["controller"]["opa_token_file"] = None
    for wt in document["workload_types"].values():
        if wt.get("idle"):
            wt["idle"] = {
                "util_threshold_percent": 5.0,
                "window_seconds": WINDOW,
                "grace_seconds": GRACE,
            }
    return document


def dcgm(
    pod: str,
    namespace: str,
    node: str,
    start: float,
    end: float,
    *,
    util: float | Callable[[float], float] = 0.0,
    fb: float = 2048.0,
    gpus: int = 1,
    step: int = SCRAPE,
) -> list[Sample]:
    """DCGM-shaped samples for one pod's GPUs, every `step` seconds from start to end."""
    samples: list[Sample] = []
    t = start
    while t <= end:
        value = util(t) if callable(util) else util
        for gpu in range(gpus):
            labels = {"namespace": namespace, "pod": pod, "Hostname": node, "gpu": str(gpu)}
            samples.append(Sample("DCGM_FI_DEV_GPU_UTIL", labels, value, t))
            samples.append(Sample("DCGM_FI_DEV_FB_USED", labels, fb, t))
        t += step
    return samples


def template(
    workload_type: str,
    *,
    gpus: int = 1,
    labels: dict[str, str] | None = None,
    node: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "tolerations": GPU_TOLERATIONS,
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "main",
                "image": GPU_IMAGE,
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
            }
        ],
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {
        "metadata": {"labels": {"fleetplane.dev/workload-type": workload_type, **(labels or {})}},
        "spec": spec,
    }


def deployment(name: str, workload_type: str, **kwargs: Any) -> dict[str, Any]:
    tmpl = template(workload_type, **kwargs)
    tmpl["metadata"]["labels"]["app"] = name
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}}, "template": tmpl},
    }


def job(name: str, workload_type: str, **kwargs: Any) -> dict[str, Any]:
    tmpl = template(workload_type, **kwargs)
    tmpl["spec"]["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"template": tmpl, "backoffLimit": 0},
    }


def bare_pod(name: str, workload_type: str, **kwargs: Any) -> dict[str, Any]:
    tmpl = template(workload_type, **kwargs)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **tmpl["metadata"]},
        "spec": tmpl["spec"],
    }


class Tee(io.TextIOBase):
    def __init__(self, *streams: Any) -> None:
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)


@dataclass
class Run:
    """One pass: its summary, what it printed, its JSON log lines; counts about this test's
    namespace (the cluster is shared with other tests' namespaces)."""

    summary: Summary
    out: str
    logs: list[dict[str, Any]]
    namespace: str

    def mine(self, event: str) -> list[dict[str, Any]]:
        prefix = f"{self.namespace}/"
        return [
            line
            for line in self.logs
            if line["event"] == event
            and any(
                str(line.get(k, "")).startswith(prefix) or f"/{prefix}" in str(line.get(k, ""))
                for k in ("pod", "target", "victim", "preemptor")
            )
        ]

    def verdicts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for line in self.mine("idle.judged"):
            counts[line["verdict"]] = counts.get(line["verdict"], 0) + 1
        counts["no-evidence"] = len(self.mine("idle.no-evidence")) or counts.get("no-evidence", 0)
        return {k: v for k, v in counts.items() if v}

    def actions(self, event: str) -> int:
        return len(self.mine(event))


@dataclass
class Harness:
    kube: LocalCluster
    namespace: str
    opa: OpaServer
    document: dict[str, Any]
    client: KubeClient
    prometheus_url: str = field(default_factory=closed_url)

    def settings(self, **overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "prometheus_url": self.prometheus_url,
            "opa_url": self.opa.url,
            "lease_namespace": self.namespace,
            "lease_name": "fleetplane-controller",
            "scrape_interval_seconds": SCRAPE,
            "preemption_pending_seconds": 60,
            "request_timeout_seconds": 5,
        }
        values.update(overrides)
        return Settings(**values)

    def run(
        self,
        now: float,
        *,
        concerns: tuple[str, ...] = HARNESS_CONCERNS,
        hooks: Hooks | None = None,
        **overrides: Any,
    ) -> Run:
        out, logs = io.StringIO(), io.StringIO()
        configure("debug", Tee(logs, sys.stderr))
        try:
            summary = run_pass(
                kube=self.client,
                fleet=parse_config(self.document),
                settings=self.settings(**overrides),
                concerns=concerns,
                now=now,
                hooks=hooks,
                out=out,
            )
        finally:
            configure("debug", sys.stderr)
        lines = [json.loads(line) for line in logs.getvalue().splitlines() if line.strip()]
        return Run(summary=summary, out=out.getvalue(), logs=lines, namespace=self.namespace)

    # cluster helpers -------------------------------------------------------------------------

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        api_version, kind = obj["apiVersion"], obj["kind"]
        plural = {
            "Deployment": "deployments",
            "Job": "jobs",
            "Pod": "pods",
            "StatefulSet": "statefulsets",
            "PodDisruptionBudget": "poddisruptionbudgets",
            "PriorityClass": "priorityclasses",
        }[kind]
        namespaced = kind != "PriorityClass"
        body = copy.deepcopy(obj)
        if namespaced:
            body["metadata"]["namespace"] = self.namespace
        return self.client.create(
            object_path(api_version, plural, self.namespace if namespaced else None, None), body
        )

    def get(self, api_version: str, plural: str, name: str) -> dict[str, Any]:
        return self.client.get(object_path(api_version, plural, self.namespace, name))

    def pods(self, selector: str | None = None) -> list[dict[str, Any]]:
        params = {"labelSelector": selector} if selector else None
        return self.client.list(pod_path(self.namespace), params=params)

    def pod(self, name: str) -> dict[str, Any]:
        return self.client.get(pod_path(self.namespace, name))

    def wait_running(
        self, selector: str, count: int = 1, timeout: float = 60
    ) -> list[dict[str, Any]]:
        def running() -> list[dict[str, Any]] | None:
            found = [
                p
                for p in self.pods(selector)
                if p["status"].get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")
            ]
            return found if len(found) >= count else None

        return wait_for(running, timeout)

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        items = self.client.list(f"/api/v1/namespaces/{self.namespace}/events")
        return [e for e in items if name is None or e["involvedObject"]["name"] == name]

    def reasons(self, name: str) -> list[str]:
        return sorted(e["reason"] for e in self.events(name))


def wait_for(predicate: Callable[[], Any], timeout: float = 60, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


def started_at(pod: dict[str, Any]) -> float:
    from controller.observe.model import parse_time

    value = parse_time(pod["status"].get("startTime"))
    assert value is not None
    return value


@pytest.fixture
def client(kube: LocalCluster) -> Iterator[KubeClient]:
    """A controller client of the session's API server, closed after the test."""
    found = KubeClient.from_kubeconfig(str(kube.kubeconfig))
    try:
        yield found
    finally:
        found.close()


@pytest.fixture
def harness(kube: LocalCluster, namespace: str, opa_server: OpaServer) -> Iterator[Harness]:
    document = config_for(namespace)
    opa_server.put_data("fleetplane/config", document)
    opa_server.put_data("fleetplane/spend", {})
    client = KubeClient.from_kubeconfig(str(kube.kubeconfig))
    try:
        yield Harness(
            kube=kube, namespace=namespace, opa=opa_server, document=document, client=client
        )
    finally:
        client.close()


def annotations_of(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=1, sort_keys=True)


CONTROLLER_TOKEN = "c0ntroller-t0ken-for-tests"


def gate_opa(work_dir: Any, config: dict[str, Any], *extra_data: Any) -> OpaServer:
    """An OPA that runs as the gate's does (not started): the configuration loaded from a file
    at start as the Deployment's `/data` volume holds it, `extra_data` directories beside it,
    authentication and authorization on, the controller known by CONTROLLER_TOKEN and callers
    without a token given the webhook's role (as on EKS and GKE)."""
    from pathlib import Path

    from fleet.opa import authz_document, token_sha256

    work = Path(work_dir)
    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    # with a revision, as the gate's data names what it loaded (fleet/opa_data.py)
    document = {"fleetplane": {"config": config, "revision": GATE_REVISION}}
    (data / "data.json").write_text(json.dumps(document))
    return OpaServer(
        work_dir=work / "opa",
        data=(data, *(Path(d) for d in extra_data)),
        authz=authz_document({token_sha256(CONTROLLER_TOKEN): "controller"}),
    )


KEPT = "fleetplane-opa-controller-data"
"""The ConfigMap the gate's OPA loads the controller's documents from at start."""
GATE_REVISION = "0123456789abcdef"
"""`data.fleetplane.revision` of the gate's OPA in tests (gate_opa)."""


def gate_settings(opa: OpaServer, work_dir: Any, namespace: str, *, kept: bool) -> Settings:
    """A pass against an OPA run as the gate's (gate_opa): the controller's token, Prometheus
    nowhere, the Lease in `namespace`; `kept`: its documents also written to the ConfigMap
    KEPT there."""
    return Settings(
        prometheus_url=closed_url(),
        opa_url=opa.url,
        opa_token_file=token_file(work_dir),
        opa_data_configmap=f"{namespace}/{KEPT}" if kept else None,
        lease_namespace=namespace,
        request_timeout_seconds=5,
    )


@contextmanager
def answers_kept(
    harness: Harness, opa: OpaServer, revision: str = "test-revision-1"
) -> Iterator[Harness]:
    """The harness's passes with a place to keep their disruption answers (KEPT in its
    namespace) and `opa` with a revision loaded, as the gate runs (controller/decide/
    disruption_memo.py); both taken away after."""
    base = harness.settings
    place = f"{harness.namespace}/{KEPT}"
    harness.settings = lambda **o: base(**{"opa_data_configmap": place, **o})  # type: ignore[method-assign]
    opa.put_data("fleetplane/revision", revision)
    try:
        yield harness
    finally:
        opa.delete_data("fleetplane/revision")
        del harness.settings  # the class's method again


def token_file(directory: Any) -> str:
    """CONTROLLER_TOKEN in a file, as the CronJob mounts it from the gate's Secret."""
    from pathlib import Path

    path = Path(directory) / "opa-token"
    path.write_text(CONTROLLER_TOKEN + "\n")
    return str(path)


def research_home_config(namespace: str) -> dict[str, Any]:
    """The review corpus's configuration with `namespace` as team research's home namespace."""
    config: dict[str, Any] = json.loads((CORPUS_DIR / "config.json").read_text())
    config["namespaces"][namespace] = "research"
    config["teams"]["research"]["namespaces"].insert(0, namespace)  # the team's home
    return config


def spent_this_month(client: KubeClient, namespace: str, usd: float) -> None:
    """The team's spend accumulator on its home namespace: `usd` spent this month by pods
    already gone."""
    month = time.strftime("%Y-%m", time.gmtime())
    client.merge_patch(
        namespace_path(namespace),
        {
            "metadata": {
                "annotations": {
                    "fleetplane.dev/spend": Accumulator(month=month, gone_usd=usd).encode()
                }
            }
        },
    )
