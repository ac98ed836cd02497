"""A stand-in for NVIDIA's dcgm-exporter on the local fleet's fake GPU nodes.

There is no GPU here, so no DCGM: this serves, per fake GPU node, the series dcgm-exporter
serves there, with its metric names and labels (`gpu`, `UUID`, `pci_bus_id`, `device`,
`modelName`, `Hostname`, and `container`, `namespace`, `pod` of the workload holding the GPU, as
its Kubernetes pod mapping adds them), at values a test or the scenario sets per pod or per GPU
through a small HTTP API. It serves exactly the fields the fleet's counters file enables (the
file the GPU Operator deploys, `fleet.dcgm.counters_csv`, read back here as dcgm-exporter reads
it), so a series the product reads but the real exporter would not serve is missing here too.

    GET    /metrics?node=NODE               the node's series (no node: every node's)
    GET    /v1/state                        GPUs, their holders and values, as JSON
    PUT    /v1/pods/NAMESPACE/POD           {"DCGM_FI_DEV_GPU_UTIL": 0, ...} for each GPU of a pod
    PUT    /v1/gpus/NODE/INDEX              the same for one GPU (faults: Xid, ECC, temperature)
    DELETE /v1/pods/NAMESPACE/POD, /v1/gpus/NODE/INDEX      back to the defaults

Which pod holds which GPU is read from the API server (pods bound to a node, running, with
`nvidia.com/gpu` requests), and GPUs are handed out in index order as the device plugin
would. A GPU with a holder defaults to busy (`BUSY`), a free one to idle (`FREE`).

The local Prometheus scrapes it, one target per node, through the scrape configuration the
production ServiceMonitor renders to (`scrape_config`), so the evidence the controller joins
on is labelled exactly as in a cluster.

    python -m localfleet.dcgm_exporter --kubeconfig KUBECONFIG --port PORT
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fleet import labels
from fleet.dcgm import counters_csv, enabled_fields

METRICS: dict[str, tuple[str, str]] = {
    field.name: (field.kind, field.help) for field in enabled_fields(counters_csv()).values()
}
"""The fields the fleet's counters file enables: name -> (type, help), in the file's order."""
_HEALTHY: dict[str, float] = {
    "DCGM_FI_DEV_XID_ERRORS": 0,
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": 0,
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0,
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": 0,
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": 0,
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 0,
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
    "DCGM_FI_DEV_ROW_REMAP_PENDING": 0,
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0,
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": 0,
}
"""No error of any kind (the faults a test sets are on top)."""
BUSY: dict[str, float] = {
    "DCGM_FI_DEV_GPU_UTIL": 87,
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0.82,
    "DCGM_FI_DEV_FB_USED": 30000,
    "DCGM_FI_DEV_GPU_TEMP": 64,
    "DCGM_FI_DEV_POWER_USAGE": 520.0,
    **_HEALTHY,
}
FREE: dict[str, float] = {
    **BUSY,
    "DCGM_FI_DEV_GPU_UTIL": 0,
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0.0,
    "DCGM_FI_DEV_FB_USED": 0,
    "DCGM_FI_DEV_GPU_TEMP": 34,
    "DCGM_FI_DEV_POWER_USAGE": 70.0,
}


@dataclass(frozen=True)
class Gpu:
    node: str
    index: int
    model: str

    @property
    def uuid(self) -> str:
        return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{self.node}/{self.index}"))

    def identity(self) -> dict[str, str]:
        """dcgm-exporter's device labels, in its order."""
        return {
            "gpu": str(self.index),
            "UUID": self.uuid,
            "pci_bus_id": f"00000000:{0x10 + self.index:02X}:00.0",
            "device": f"nvidia{self.index}",
            "modelName": self.model,
            "Hostname": self.node,
        }


@dataclass(frozen=True)
class Holder:
    namespace: str
    pod: str
    container: str


def gpus_of(node: Mapping[str, Any]) -> list[Gpu]:
    meta = node.get("metadata", {})
    node_labels = meta.get("labels", {}) or {}
    count = int((node.get("status", {}).get("allocatable", {}) or {}).get(labels.GPU_RESOURCE, 0))
    model = node_labels.get(labels.GPU_PRODUCT, "NVIDIA GPU")
    return [Gpu(node=meta["name"], index=index, model=model) for index in range(count)]


def _gpu_requests(container: Mapping[str, Any]) -> int:
    resources = container.get("resources", {}) or {}
    for part in ("limits", "requests"):
        value = (resources.get(part) or {}).get(labels.GPU_RESOURCE)
        if value is not None:
            return int(value)
    return 0


def assign(
    nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]
) -> dict[Gpu, Holder]:
    """Which container holds which GPU: running pods bound to a node, oldest first, each
    container its requested count of the node's lowest free indices."""
    gpus = {node["metadata"]["name"]: gpus_of(node) for node in nodes}
    taken: dict[Gpu, Holder] = {}
    running = [
        p
        for p in pods
        if p.get("spec", {}).get("nodeName") in gpus
        and p.get("status", {}).get("phase") == "Running"
        and not p.get("metadata", {}).get("deletionTimestamp")
    ]
    running.sort(key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))
    for pod in running:
        free = [g for g in gpus[pod["spec"]["nodeName"]] if g not in taken]
        for container in pod["spec"].get("containers", []):
            for _ in range(_gpu_requests(container)):
                if not free:
                    break
                taken[free.pop(0)] = Holder(
                    namespace=pod["metadata"]["namespace"],
                    pod=pod["metadata"]["name"],
                    container=container["name"],
                )
    return taken


@dataclass
class ExporterState:
    """The GPUs, their holders, and the values set through the API."""

    gpus: list[Gpu] = field(default_factory=list)
    holders: dict[Gpu, Holder] = field(default_factory=dict)
    by_pod: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    by_gpu: dict[tuple[str, int], dict[str, float]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def values(self, gpu: Gpu) -> dict[str, float]:
        holder = self.holders.get(gpu)
        out = dict(BUSY if holder else FREE)
        if holder is not None:
            out.update(self.by_pod.get((holder.namespace, holder.pod), {}))
        out.update(self.by_gpu.get((gpu.node, gpu.index), {}))
        return out

    def exposition(self, node: str | None = None) -> str:
        """The Prometheus text format dcgm-exporter serves (families in METRICS order)."""
        with self.lock:
            chosen = [g for g in self.gpus if node is None or g.node == node]
            rows = [(g, self.holders.get(g), self.values(g)) for g in chosen]
        lines: list[str] = []
        for metric, (kind, help_text) in METRICS.items():
            lines.append(f"# HELP {metric} {help_text}")
            lines.append(f"# TYPE {metric} {kind}")
            for gpu, holder, values in rows:
                series = gpu.identity()
                if holder is not None:
                    series.update(
                        container=holder.container, namespace=holder.namespace, pod=holder.pod
                    )
                rendered = ",".join(f'{k}="{_escape(v)}"' for k, v in series.items())
                lines.append(f"{metric}{{{rendered}}} {_number(values[metric])}")
        return "\n".join(lines) + "\n"

    def as_json(self) -> dict[str, Any]:
        with self.lock:
            return {
                "gpus": [
                    {
                        **gpu.identity(),
                        "holder": None
                        if (h := self.holders.get(gpu)) is None
                        else {"namespace": h.namespace, "pod": h.pod, "container": h.container},
                        "values": self.values(gpu),
                    }
                    for gpu in self.gpus
                ]
            }


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _checked_values(body: Any) -> dict[str, float]:
    if not isinstance(body, dict):
        raise ValueError("expected a JSON object of metric name -> number")
    out: dict[str, float] = {}
    for key, value in body.items():
        if key not in METRICS:
            enabled = ", ".join(METRICS)
            raise ValueError(f"{key!r} is not enabled by the fleet's counters file ({enabled})")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{key}: expected a number")
        out[key] = float(value)
    return out


def handler_for(state: ExporterState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _reply(self, status: int, body: str, kind: str = "application/json") -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _target(self) -> tuple[str, tuple[Any, ...]] | None:
            parts = [p for p in urlsplit(self.path).path.split("/") if p]
            if len(parts) == 4 and parts[:2] == ["v1", "pods"]:
                return "pod", (parts[2], parts[3])
            if len(parts) == 4 and parts[:2] == ["v1", "gpus"] and parts[3].isdigit():
                return "gpu", (parts[2], int(parts[3]))
            return None

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path == "/metrics":
                node = parse_qs(url.query).get("node", [None])[0]
                self._reply(200, state.exposition(node), "text/plain; version=0.0.4")
            elif url.path == "/v1/state":
                self._reply(200, json.dumps(state.as_json()))
            elif url.path == "/health":
                self._reply(200, "{}")
            else:
                self._reply(404, '{"error": "not found"}')

        def do_PUT(self) -> None:
            target = self._target()
            if target is None:
                self._reply(404, '{"error": "PUT /v1/pods/NS/POD or /v1/gpus/NODE/INDEX"}')
                return
            try:
                length = int(self.headers.get("Content-Length", "0"))
                values = _checked_values(json.loads(self.rfile.read(length) or b"{}"))
            except ValueError as error:
                self._reply(400, json.dumps({"error": str(error)}))
                return
            kind, key = target
            with state.lock:
                table: dict[Any, dict[str, float]] = state.by_pod if kind == "pod" else state.by_gpu
                table.setdefault(key, {}).update(values)
            self._reply(200, "{}")

        def do_DELETE(self) -> None:
            target = self._target()
            if target is None:
                self._reply(404, '{"error": "not found"}')
                return
            kind, key = target
            with state.lock:
                table: dict[Any, dict[str, float]] = state.by_pod if kind == "pod" else state.by_gpu
                table.pop(key, None)
            self._reply(200, "{}")

    return Handler


class KubeReader:
    """Lists nodes and pods with the kubeconfig's client certificate (the local admin)."""

    def __init__(self, kubeconfig: str) -> None:
        import requests
        import yaml

        with open(kubeconfig) as handle:
            config = yaml.safe_load(handle)
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        self.server = cluster["server"]
        self.session = requests.Session()
        self.session.cert = (user["client-certificate"], user["client-key"])
        # Per request: a session's `verify` loses to REQUESTS_CA_BUNDLE in the environment.
        self.ca = cluster["certificate-authority"]

    def items(self, path: str) -> list[dict[str, Any]]:
        response = self.session.get(self.server + path, timeout=10, verify=self.ca)
        response.raise_for_status()
        return list(response.json()["items"])

    def refresh(self, state: ExporterState) -> None:
        nodes = [
            n
            for n in self.items("/api/v1/nodes")
            if int((n.get("status", {}).get("allocatable", {}) or {}).get(labels.GPU_RESOURCE, 0))
        ]
        pods = self.items("/api/v1/pods?fieldSelector=status.phase%3DRunning")
        holders = assign(nodes, pods)
        gpus = [gpu for node in nodes for gpu in gpus_of(node)]
        with state.lock:
            state.gpus, state.holders = gpus, holders


def scrape_config(
    service_monitor: Mapping[str, Any],
    address: str,
    nodes: list[str],
    *,
    namespace: str = "gpu-operator",
) -> dict[str, Any]:
    """The Prometheus scrape configuration the Prometheus Operator generates from the GPU
    Operator's ServiceMonitor (`components.gpu_operator.dcgm_service_monitor`), for the
    stand-in at `address`: one target per node, as the exporter's DaemonSet has one pod per
    node, carrying the target labels the operator's relabelling gives every target
    (`namespace`, `service`, `pod`, `container`, `endpoint`, `job` of the exporter itself),
    with the ServiceMonitor's honorLabels, interval and relabelings."""
    from components.gpu_operator import DCGM_EXPORTER, DCGM_EXPORTER_PORT

    return {
        "job_name": f"serviceMonitor/{namespace}/{DCGM_EXPORTER}/0",
        "honor_labels": bool(service_monitor.get("honorLabels", False)),
        "scrape_interval": service_monitor.get("interval", "30s"),
        "metrics_path": "/metrics",
        "static_configs": [
            {
                "targets": [address],
                "labels": {
                    "__param_node": node,
                    "namespace": namespace,
                    "service": DCGM_EXPORTER,
                    "pod": f"{DCGM_EXPORTER}-{node}",
                    "container": DCGM_EXPORTER,
                    "endpoint": DCGM_EXPORTER_PORT,
                    "job": DCGM_EXPORTER,
                },
            }
            for node in nodes
        ],
        "relabel_configs": list(service_monitor.get("relabelings", [])),
        "metric_relabel_configs": list(service_monitor.get("metricRelabelings", [])),
    }


def start_server(state: ExporterState, host: str, port: int) -> ThreadingHTTPServer:
    """Serve `state` on host:port from a thread (port 0: a free one, `server_port`)."""
    server = ThreadingHTTPServer((host, port), handler_for(state))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def serve(kubeconfig: str, host: str, port: int, refresh_seconds: float) -> None:
    state = ExporterState()
    reader = KubeReader(kubeconfig)
    start_server(state, host, port)
    while True:
        try:
            reader.refresh(state)
        except Exception as error:  # the API server may be away for a moment; keep serving
            print(f"dcgm-exporter stand-in: refresh failed: {error}", flush=True)
        time.sleep(refresh_seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--refresh-seconds", type=float, default=1.0)
    args = parser.parse_args(argv)
    serve(args.kubeconfig, args.host, args.port, args.refresh_seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
