"""One full controller pass at fleet scale: wall time, peak memory, API requests.

    python bench/controller_pass.py [--nodes 2000,5000] [--pods-per-node 10] [--decode-only]

Starts a local control plane of its own (etcd, kube-apiserver, scheduler, controller-manager,
kwok; `tools.localcluster`), a real OPA with the project's policies and a real Prometheus, then
for each fleet size (growing the same cluster):

1. creates fake 8-GPU H100 nodes (kwok keeps them Ready) and ~10 pods per node, already bound
   with `spec.nodeName` (8 one-GPU pods of ten teams' training, notebook and inference work,
   plus 2 CPU pods), in parallel threads through the API; kwok moves them to Running;
2. backfills Prometheus with DCGM series (utilisation and framebuffer, one sample a minute over
   the idle window) for every GPU pod: most are busy, a small fraction is idle, and of those
   half already carry an expired idle warning, so the pass warns some and reclaims others;
3. times one `python -m controller reconcile` in a child process (observe, decide, act: idle
   warnings and reclaims through OPA, spend for ten teams published to OPA, preemption
   planning) and prints its wall time, the pass duration it reports, the child's peak memory
   (getrusage, RUSAGE_CHILDREN) and the number of Kubernetes API requests it made.

`--decode-only` also compares decoding a few thousand listed pods through the official client's
models against raw JSON + orjson (the figures quoted in controller/observe/kube.py).

Setup (creating tens of thousands of objects and letting kwok run them on 2 cores) takes far
longer than the pass; its time is printed too. Figures only: nothing here asserts timing.

Measured on the 2-core development machine while other work shared it (load average 11-16):

    nodes   pods    pass    observe  idle   spend  preempt  peak RSS  API requests
    2,000  20,000   32.7 s  20.1 s   8.6 s  2.8 s  0.4 s    321 MiB   169
    5,000  50,000   30.6 s  24.0 s   4.2 s  1.4 s  0.6 s    663 MiB   263

Memory is within the 1 GiB target; time is not within 5 s. Observing dominates: the API server
encodes ~150 MiB of pod JSON and this process decodes it (fetching alone took 8.7 s for 50,000
pods at load ~10; listing one namespace at a time without parallelism took 81 s against 29 s
with eight lists at once). Setup took 15-28 min per size (pods created at 40-80/s; at 5,000
nodes kwok had not yet moved 7,000-13,000 of the 50,000 pods to Running when the pass ran).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from components import labels as keys  # noqa: E402
from components.localfleet import FakePool, fake_nodes  # noqa: E402
from controller.observe.kube import KubeClient  # noqa: E402
from tools.localcluster import LocalCluster  # noqa: E402
from tools.servers import OpaServer, PrometheusServer, Sample  # noqa: E402

TEAMS = [f"team-{i}" for i in range(10)]
WINDOW, GRACE, SCRAPE = 600, 300, 60
IDLE_EVERY = 400  # one GPU pod in 400 is idle (0.25 %); half of those are past their grace
GPU_PODS_PER_NODE = 8
TARGET_SECONDS, TARGET_BYTES = 5.0, 1 << 30


def log(message: str) -> None:
    print(f"[bench] {message}", flush=True)


def config_document() -> dict[str, Any]:
    from components.config import load_stack_config
    from components.render import render_opa_data, stack_file

    document = render_opa_data(load_stack_config(stack_file("local")))
    document["namespaces"] = {ns: ns for ns in TEAMS}
    document["teams"] = {
        ns: {
            **document["teams"]["research"],
            "namespaces": [ns],
            "monthly_budget_usd": 1e9,
            "guaranteed": {"nvidia.com/gpu": 0, "google.com/tpu": 0},
            "quota": {"nvidia.com/gpu": 100000, "google.com/tpu": 0},
        }
        for ns in TEAMS
    }
    for wt in document["workload_types"].values():
        if wt.get("idle"):
            wt["idle"] = {
                "util_threshold_percent": 5.0,
                "window_seconds": WINDOW,
                "grace_seconds": GRACE,
            }
    return document


def pool(start: int, count: int) -> list[dict[str, Any]]:
    nodes = fake_nodes(
        [
            FakePool(
                name="bench-h100",
                count=start + count,
                resource="nvidia.com/gpu",
                per_node=8,
                labels={
                    keys.POOL: "bench-h100",
                    keys.CAPACITY_TYPE: "on-demand",
                    keys.GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3",
                    keys.GPU_COUNT: "8",
                },
                taints=[dict(keys.GPU_TAINT)],
            )
        ]
    )
    return nodes[start:]


def workload_type(index: int) -> str:
    return (
        "training",
        "training",
        "training",
        "training",
        "training",
        "training",
        "training",
        "notebook",
        "notebook",
        "inference",
    )[index % 10]


def pods_for(node_index: int, pods_per_node: int, pass_at: float) -> list[dict[str, Any]]:
    node = f"bench-h100-{node_index}"
    out = []
    for i in range(pods_per_node):
        gpu = i < GPU_PODS_PER_NODE
        serial = node_index * pods_per_node + i
        wt = workload_type(serial) if gpu else "cpu"
        annotations = {}
        if gpu and serial % IDLE_EVERY == 0 and (serial // IDLE_EVERY) % 2 == 1:
            annotations = {
                keys.IDLE_WARNED_AT: str(int(pass_at - GRACE - 60)),
                keys.RECLAIM_DEADLINE: str(int(pass_at - 60)),
            }
        container: dict[str, Any] = {"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3"}
        if gpu:
            container["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"p-{node_index}-{i}",
                    "namespace": TEAMS[node_index % len(TEAMS)],
                    "labels": {keys.WORKLOAD_TYPE: wt} if gpu else {"app": "sidecar"},
                    "annotations": annotations,
                },
                "spec": {
                    "nodeName": node,
                    "tolerations": [{"operator": "Exists"}],
                    "terminationGracePeriodSeconds": 0,
                    "containers": [container],
                },
            }
        )
    return out


def create_all(
    client: KubeClient, items: list[tuple[str, dict[str, Any]]], threads: int = 16
) -> None:
    def create(item: tuple[str, dict[str, Any]]) -> None:
        path, body = item
        for attempt in range(5):
            try:
                client.create(path, body)
                return
            except Exception as error:
                if "AlreadyExists" in str(error) or "409" in str(error):
                    return
                if attempt == 4:
                    raise
                time.sleep(0.5 * (attempt + 1))

    with ThreadPoolExecutor(max_workers=threads) as pool_:
        list(pool_.map(create, items, chunksize=64))


def count_not_running(client: KubeClient) -> int:
    total = 0
    for page in client.list_pages(
        "/api/v1/pods", params={"fieldSelector": "status.phase!=Running"}, limit=5000
    ):
        total += len(page)
    return total


def samples_for(node_count: int, pods_per_node: int, pass_at: float) -> list[Sample]:
    samples: list[Sample] = []
    start = pass_at - WINDOW - SCRAPE
    stamps = [start + k * SCRAPE for k in range(int((WINDOW + 2 * SCRAPE) / SCRAPE) + 1)]
    for node_index in range(node_count):
        node = f"bench-h100-{node_index}"
        for i in range(min(pods_per_node, GPU_PODS_PER_NODE)):
            serial = node_index * pods_per_node + i
            util = 0.0 if serial % IDLE_EVERY == 0 else 55.0
            labels = {
                "namespace": TEAMS[node_index % len(TEAMS)],
                "pod": f"p-{node_index}-{i}",
                "Hostname": node,
                "gpu": "0",
            }
            for t in stamps:
                samples.append(Sample("DCGM_FI_DEV_GPU_UTIL", labels, util, t))
                samples.append(Sample("DCGM_FI_DEV_FB_USED", labels, 4096.0, t))
    return samples


def measure_decoding(client: KubeClient, kubeconfig: Path, count: int = 5000) -> None:
    import kubernetes
    import orjson

    api_client = kubernetes.config.new_client_from_config(str(kubeconfig))
    core = kubernetes.client.CoreV1Api(api_client)

    def typed() -> int:
        n, token = 0, None
        while n < count:
            page = core.list_pod_for_all_namespaces(limit=500, _continue=token)
            n += len(page.items)
            token = page.metadata._continue if page.metadata else None
            if not token:
                break
        return n

    def raw_client() -> int:
        n, token = 0, None
        while n < count:
            response = core.list_pod_for_all_namespaces(
                limit=500, _continue=token, _preload_content=False
            )
            body = orjson.loads(response.data)  # type: ignore[attr-defined]
            n += len(body["items"])
            token = body["metadata"].get("continue")
            if not token:
                break
        return n

    def raw_requests() -> int:
        n = 0
        for page in client.list_pages("/api/v1/pods", limit=500):
            n += len(page)
            if n >= count:
                break
        return n

    for name, fn in (
        ("kubernetes client, typed models", typed),
        ("kubernetes client, _preload_content=False + orjson", raw_client),
        ("requests + orjson (controller)", raw_requests),
    ):
        started = time.perf_counter()
        n = fn()
        seconds = time.perf_counter() - started
        log(f"decode: {name:55s} {n} pods in {seconds:6.2f} s ({n / seconds:7.0f} pods/s)")


def timed_pass(
    config: Path, kubeconfig: Path, opa: str, prometheus: str, pass_at: float
) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "controller",
            "reconcile",
            "--config",
            str(config),
            "--kubeconfig",
            str(kubeconfig),
            "--opa-url",
            opa,
            "--prometheus-url",
            prometheus,
            "--lease-namespace",
            "default",
            "--now",
            str(pass_at),
            "--scrape-interval",
            str(SCRAPE),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    summary_line = next(
        (line for line in result.stdout.splitlines() if line.startswith("SUMMARY ")), None
    )
    if summary_line is None:
        raise SystemExit(f"pass failed ({result.returncode}):\n{result.stderr[-3000:]}")
    summary = json.loads(summary_line.removeprefix("SUMMARY "))
    return {
        "exit": result.returncode,
        "wall": wall,
        "pass": summary.get("last_pass_duration_seconds"),
        "peak_bytes": summary.get("peak_memory_bytes")
        or (peak_kib * 1024 if peak_kib > before else None),
        "api_requests": summary.get("api_requests"),
        "summary": summary,
        "stderr": result.stderr[-2000:],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--nodes", default="2000,5000", help="fleet sizes, growing (default 2000,5000)"
    )
    parser.add_argument("--pods-per-node", type=int, default=10)
    parser.add_argument(
        "--decode-only", action="store_true", help="also measure decoding (typed vs raw)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="leave the cluster running (prints its kubeconfig)"
    )
    parser.add_argument(
        "--running-timeout", type=float, default=900, help="wait this long for kwok to run pods"
    )
    args = parser.parse_args()
    sizes = [int(n) for n in args.nodes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="fleetplane-bench-"))
    cluster = LocalCluster(data_dir=work / "cluster", keep=args.keep, detach=args.keep)
    (work / "opa").mkdir()
    opa = OpaServer(work_dir=work / "opa")
    setup_started = time.monotonic()
    cluster.start()
    try:
        opa.start()
        document = config_document()
        opa.put_data("fleetplane/config", document)
        config = work / "config.json"
        config.write_text(json.dumps(document))
        client = KubeClient.from_kubeconfig(str(cluster.kubeconfig), timeout=120, pool=32)
        create_all(client, [("/api/v1/namespaces", {"metadata": {"name": ns}}) for ns in TEAMS])
        # One time for every pod's idle window: the pass runs as if after the window.
        made = 0
        results: list[tuple[int, int, dict[str, Any]]] = []
        for size in sizes:
            phase = time.monotonic()
            nodes = pool(made, size - made)
            create_all(client, [("/api/v1/nodes", node) for node in nodes])
            log(f"{size} nodes: created {len(nodes)} nodes in {time.monotonic() - phase:.0f}s")
            t = time.monotonic()
            pass_at = time.time() + WINDOW + 3600  # filled in below once pods run
            pods = [p for i in range(made, size) for p in pods_for(i, args.pods_per_node, pass_at)]
            create_all(
                client,
                [(f"/api/v1/namespaces/{p['metadata']['namespace']}/pods", p) for p in pods],
                threads=24,
            )
            log(
                f"{size} nodes: created {len(pods)} pods in {time.monotonic() - t:.0f}s ({len(pods) / (time.monotonic() - t):.0f}/s)"
            )
            t = time.monotonic()
            while time.monotonic() - t < args.running_timeout:
                pending = count_not_running(client)
                if pending == 0:
                    break
                time.sleep(5)
            log(
                f"{size} nodes: pods Running after {time.monotonic() - t:.0f}s (not running: {pending})"
            )
            made = size
            t = time.monotonic()
            prometheus = PrometheusServer(work_dir=work / f"prometheus-{size}")
            prometheus.start(samples_for(size, args.pods_per_node, pass_at), timeout=600)
            log(f"{size} nodes: prometheus backfilled in {time.monotonic() - t:.0f}s")
            setup = time.monotonic() - phase
            load = os.getloadavg()
            log(
                f"{size} nodes: load average before the pass {load[0]:.1f} (2 cores; other work shares them)"
            )
            try:
                if args.decode_only and size == sizes[0]:
                    measure_decoding(client, cluster.kubeconfig)
                figures = timed_pass(config, cluster.kubeconfig, opa.url, prometheus.url, pass_at)
            finally:
                prometheus.stop()
            actions = {k: v for k, v in figures["summary"].items() if k.startswith("actions")}
            verdicts = {
                k: v
                for k, v in figures["summary"].items()
                if k.startswith(("idle_pods", "phase_seconds"))
            }
            log(f"{size} nodes: setup {setup:.0f}s; actions {actions}; verdicts {verdicts}")
            if figures["exit"] != 0:
                log(f"pass exit {figures['exit']}: {figures['stderr']}")
            figures["load"] = load[0]
            results.append((size, len(pods) + (results[-1][1] if results else 0), figures))
        print()
        print(
            f"{'nodes':>6} {'pods':>7} {'wall s':>7} {'pass s':>7} {'peak MiB':>9} {'API req':>8}"
        )
        for size, pod_count, figures in results:
            peak = figures["peak_bytes"]
            print(
                f"{size:>6} {pod_count:>7} {figures['wall']:>7.2f} {figures['pass']:>7.2f} "
                f"{(peak or 0) / 2**20:>9.0f} {figures['api_requests']:>8} {figures['load']:>5.1f}"
            )
        print(f"target: 5,000 nodes in <= {TARGET_SECONDS:.0f} s and <= 1 GiB")
        print(f"total setup and measurement: {time.monotonic() - setup_started:.0f}s")
    finally:
        opa.stop()
        if args.keep:
            log(
                f"cluster left running: KUBECONFIG={cluster.kubeconfig}; stop it with "
                f"`python -m tools.localcluster --dir {cluster.data_dir} down`"
            )
        else:
            cluster.stop()
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
