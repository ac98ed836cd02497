"""Faults on the integrated parts: the DCGM exporter down (no reclaim without evidence) and OPA
down (the gate's failurePolicy refuses what it cannot judge; the platform's namespaces, outside
its scope, keep working).

The others are elsewhere: vc-scheduler killed and restarted (tests/localfleet/test_volcano.py),
Prometheus down, OPA down for the controller and the controller killed half way through a pass
(tests/controller/test_safety.py)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from components.gpu_operator import dcgm_service_monitor
from controller.decide.idle import EvidenceRules, Verdict, plan_idle
from controller.observe.metrics import Prometheus
from fleet.config import FleetConfig
from localfleet.controlplane import LocalCluster, free_port
from localfleet.dcgm_exporter import ExporterState, Gpu, Holder, scrape_config, start_server
from localfleet.servers import PrometheusServer
from tests.controller.builders import a_pod, fleet

pytestmark = pytest.mark.integration

NODE = "gpu-node-0"
WINDOW = 20


def notebook_fleet() -> Any:
    def short_window(document: dict[str, Any]) -> None:
        document["workload_types"]["notebook"]["idle"] = {
            "util_threshold_percent": 1,
            "window_seconds": WINDOW,
            "grace_seconds": 0,
        }

    return fleet(short_window)


def judge(prometheus: PrometheusServer, now: float) -> Verdict:
    """The controller's verdict on an idle notebook warned long ago, from Prometheus's evidence."""
    rules = EvidenceRules(scrape_interval_seconds=1, min_sample_coverage=0.8, fb_steady_mib=256)
    pod = (
        a_pod("notebook-0")
        .in_ns("ml-research")
        .type("notebook")
        .gpus(1)
        .on(NODE, started=now - 600)
        .warned(now - 10, now - 5)
        .build()
    )
    evidence = {WINDOW: Prometheus(prometheus.url).evidence(WINDOW, now, idle_line_percent=1)}
    plan = plan_idle([pod], notebook_fleet(), evidence, now, rules)
    (judgement,) = plan.judgements
    return judgement.verdict


def test_no_reclaim_without_evidence_when_the_exporter_goes_down(
    stack_fleets: dict[str, FleetConfig], tmp_path: Path
) -> None:
    """An idle notebook is reclaimable while the exporter serves its series; once the exporter
    has been down for part of the window, the evidence is short and nothing is reclaimed."""
    state = ExporterState()
    gpu = Gpu(NODE, 0, "NVIDIA H100 80GB HBM3")
    state.gpus, state.holders = [gpu], {gpu: Holder("ml-research", "notebook-0", "jupyter")}
    state.by_pod[("ml-research", "notebook-0")] = {
        "DCGM_FI_DEV_GPU_UTIL": 0,
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0,
        "DCGM_FI_DEV_FB_USED": 300,
    }
    port = free_port()
    server = start_server(state, "127.0.0.1", port)
    monitor = {**dcgm_service_monitor(stack_fleets["local"]), "interval": "1s"}
    prometheus = PrometheusServer(
        work_dir=tmp_path, scrape_configs=[scrape_config(monitor, f"127.0.0.1:{port}", [NODE])]
    )
    prometheus.start()
    try:
        time.sleep(WINDOW + 3)
        assert judge(prometheus, time.time()) == Verdict.RECLAIM
        server.shutdown()
        server.server_close()
        time.sleep(WINDOW / 2)
        assert judge(prometheus, time.time()) != Verdict.RECLAIM
    finally:
        prometheus.stop()


def test_opa_down_refuses_what_the_gate_cannot_judge(kube: LocalCluster, volcano: Any) -> None:
    """The gate's webhook (failurePolicy Fail, as declared) with no OPA behind it: a pod in a
    team namespace is refused; a pod in a platform namespace (outside the webhook's
    namespaceSelector) is admitted, so the platform itself keeps working."""
    from components.platform import render_manifests

    fleet_config = volcano.fleet.model_copy(
        update={
            "opa": volcano.fleet.opa.model_copy(
                update={"external_url": f"https://127.0.0.1:{free_port()}"}
            )
        }
    )
    (hook,) = [
        m for m in render_manifests(fleet_config) if m["kind"] == "ValidatingWebhookConfiguration"
    ]
    assert hook["webhooks"][0]["failurePolicy"] == "Fail"
    hook["metadata"]["name"] = f"opa-down-{uuid.uuid4().hex[:6]}"
    kube.apply([hook])
    plain = "monitoring"  # a platform namespace: outside the gate's scope
    assert plain in json.dumps(hook["webhooks"][0]["namespaceSelector"])
    kube.kubectl("create", "namespace", plain, check=False)

    def pod(namespace: str) -> str:
        return json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"generateName": "probe-", "namespace": namespace},
                "spec": {"containers": [{"name": "main", "image": "nvcr.io/nvidia/cuda:12.4"}]},
            }
        )

    try:
        time.sleep(2)  # the API server picks up the new webhook
        refused = kube.kubectl("create", "-f", "-", input=pod("vt-beta"), check=False)
        assert refused.returncode != 0
        assert "failed calling webhook" in refused.stderr, refused.stderr
        admitted = kube.kubectl("create", "-f", "-", input=pod(plain), check=False)
        assert admitted.returncode == 0, admitted.stderr
    finally:
        kube.kubectl("delete", "validatingwebhookconfiguration", hook["metadata"]["name"])
        kube.kubectl("delete", "pods", "--all", "-n", plain, "--wait=false", check=False)
