"""The DCGM exporter stand-in, scraped by a real Prometheus through the production
ServiceMonitor's relabelling, read by the controller's evidence join.

Both sides of the seam: what the exporter serves (dcgm-exporter's names and labels), and what
the controller finds after Prometheus applied the ServiceMonitor's settings. A ServiceMonitor
that hides the workload's `pod`/`namespace` (honorLabels false) fails here."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from components.gpu_operator import dcgm_service_monitor
from controller.observe.metrics import Prometheus
from fleet.config import FleetConfig
from fleet.dcgm import counters_csv, enabled_fields
from localfleet.dcgm_exporter import (
    BUSY,
    FREE,
    METRICS,
    ExporterState,
    Gpu,
    Holder,
    assign,
    scrape_config,
    start_server,
)
from localfleet.servers import PrometheusServer

NODE = "gpu-node-0"


def gpus(node: str = NODE, count: int = 2) -> list[Gpu]:
    return [Gpu(node, i, "NVIDIA H100 80GB HBM3") for i in range(count)]


@pytest.fixture
def exporter() -> Iterator[tuple[ExporterState, str]]:
    state = ExporterState()
    first, second = gpus()
    state.gpus = [first, second]
    state.holders = {first: Holder("ml-research", "notebook-0", "jupyter")}
    server = start_server(state, "127.0.0.1", 0)
    yield state, f"127.0.0.1:{server.server_port}"
    server.shutdown()


def scrape(address: str, node: str = NODE) -> str:
    with urllib.request.urlopen(f"http://{address}/metrics?node={node}", timeout=5) as answer:
        return str(answer.read().decode())


def put(address: str, path: str, values: dict[str, Any]) -> None:
    request = urllib.request.Request(
        f"http://{address}{path}", data=json.dumps(values).encode(), method="PUT"
    )
    with urllib.request.urlopen(request, timeout=5) as answer:
        assert answer.status == 200


def test_it_serves_dcgm_exporter_names_and_labels(exporter: tuple[ExporterState, str]) -> None:
    _, address = exporter
    text = scrape(address)
    held = next(
        line for line in text.splitlines() if line.startswith('DCGM_FI_DEV_GPU_UTIL{gpu="0"')
    )
    # dcgm-exporter's label order: device identity, then the pod mapping's
    uuid = held.split('UUID="', 1)[1].split('"', 1)[0]
    assert uuid.startswith("GPU-")
    assert held == (
        f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="{uuid}",pci_bus_id="00000000:10:00.0",'
        'device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-0",'
        'container="jupyter",namespace="ml-research",pod="notebook-0"} 87'
    )
    free = next(
        line for line in text.splitlines() if line.startswith('DCGM_FI_DEV_GPU_UTIL{gpu="1"')
    )
    assert "pod=" not in free and free.endswith(" 0")
    for metric in (
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    ):
        assert f"# TYPE {metric} " in text


def test_it_serves_exactly_the_fields_the_counters_file_enables(
    exporter: tuple[ExporterState, str],
) -> None:
    """The stand-in reads the file the GPU Operator deploys (fleet/dcgm.py): a field the real
    exporter would not serve is not served here either, so no test passes on a series a GPU
    node would not have."""
    _, address = exporter
    text = scrape(address)
    enabled = enabled_fields(counters_csv())
    served = {
        line.split()[2]: line.split()[3] for line in text.splitlines() if line.startswith("# TYPE ")
    }
    assert served == {name: field.kind for name, field in enabled.items()}
    for name, field in enabled.items():
        assert f"# HELP {name} {field.help}\n" in text
    samples = {line.split("{", 1)[0] for line in text.splitlines() if not line.startswith("#")}
    assert samples == set(enabled)
    assert set(BUSY) == set(FREE) == set(METRICS) == set(enabled)
    # dcgm-exporter's default files serve these; the fleet's file enables no reader for them
    assert "DCGM_FI_DEV_FB_FREE" not in text and "DCGM_FI_DRIVER_VERSION" not in text


def test_values_are_set_per_pod_and_per_gpu(exporter: tuple[ExporterState, str]) -> None:
    _, address = exporter
    put(address, "/v1/pods/ml-research/notebook-0", {"DCGM_FI_DEV_GPU_UTIL": 0})
    put(address, f"/v1/gpus/{NODE}/1", {"DCGM_FI_DEV_XID_ERRORS": 79})
    text = scrape(address)
    assert any(
        line.startswith('DCGM_FI_DEV_GPU_UTIL{gpu="0"') and line.endswith(" 0")
        for line in text.splitlines()
    )
    assert any(
        line.startswith('DCGM_FI_DEV_XID_ERRORS{gpu="1"') and line.endswith(" 79")
        for line in text.splitlines()
    )
    for field in ("DCGM_FI_NOPE", "DCGM_FI_DEV_FB_FREE"):
        bad = urllib.request.Request(
            f"http://{address}/v1/pods/a/b", data=f'{{"{field}": 1}}'.encode(), method="PUT"
        )
        with pytest.raises(urllib.error.HTTPError, match="400"):
            urllib.request.urlopen(bad, timeout=5)


def test_gpus_go_to_running_pods_in_index_order() -> None:
    node = {
        "metadata": {"name": NODE, "labels": {"nvidia.com/gpu.product": "NVIDIA H100 80GB HBM3"}},
        "status": {"allocatable": {"nvidia.com/gpu": "4"}},
    }

    def pod(name: str, count: int, created: str, phase: str = "Running") -> dict[str, Any]:
        return {
            "metadata": {"name": name, "namespace": "t", "creationTimestamp": created},
            "spec": {
                "nodeName": NODE,
                "containers": [
                    {"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(count)}}}
                ],
            },
            "status": {"phase": phase},
        }

    held = assign(
        [node],
        [pod("b", 2, "2026-01-02"), pod("a", 1, "2026-01-01"), pod("c", 1, "2026", "Pending")],
    )
    assert {g.index: h.pod for g, h in held.items()} == {0: "a", 1: "b", 2: "b"}


def wait_for(check: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError("timed out")


@pytest.mark.integration
@pytest.mark.parametrize("honor_labels", [True, False])
def test_the_controller_joins_evidence_through_the_production_relabelling(
    honor_labels: bool,
    exporter: tuple[ExporterState, str],
    stack_fleets: dict[str, FleetConfig],
    tmp_path: Path,
) -> None:
    """The declared ServiceMonitor (honorLabels true) keeps the workload's labels, and the
    controller finds the pod's GPU; the old declaration (false) renames them to exported_*,
    and this test shows the join going blind."""
    _, address = exporter
    monitor = {**dcgm_service_monitor(stack_fleets["prod"]), "interval": "1s"}
    assert monitor["honorLabels"] is True
    monitor["honorLabels"] = honor_labels
    server = PrometheusServer(
        work_dir=tmp_path, scrape_configs=[scrape_config(monitor, address, [NODE])]
    )
    server.start()
    try:
        wait_for(lambda: bool(server.query("DCGM_FI_DEV_GPU_UTIL")))
        time.sleep(3)
        series = server.query('DCGM_FI_DEV_GPU_UTIL{gpu="0"}')[0]["metric"]
        evidence = Prometheus(server.url).evidence(60, time.time(), idle_line_percent=100)
    finally:
        server.stop()
    if honor_labels:
        assert series["pod"] == "notebook-0" and series["namespace"] == "ml-research"
        assert ("ml-research", "notebook-0") in evidence
        gpu = evidence[("ml-research", "notebook-0")].gpus[(NODE, "0")]
        assert gpu.util_samples >= 2 and gpu.max_util_percent == 87
    else:
        assert series["exported_pod"] == "notebook-0"
        assert series["pod"] == f"nvidia-dcgm-exporter-{NODE}"
        assert ("ml-research", "notebook-0") not in evidence
