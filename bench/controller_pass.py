"""One full controller pass at fleet scale: every phase, peak memory, API requests, CPU.

    python bench/controller_pass.py [--nodes 5000,10000] [--pods-per-node 10] [--passes N]
        [--create etcd|api] [--cluster-dir DIR] [--threads N] [--dry-run] [--profile DIR]
        [--pause-kwok] [--decode-only]

Starts a local control plane (etcd, kube-apiserver, scheduler, controller-manager, kwok;
`localfleet.controlplane`), OPA as the gate's (token authentication and authorization, the
configuration loaded at start), a Pushgateway and a real Prometheus, and gives the pass what
the product gives it: its OPA token file, the `fleetplane-system` namespace (its Lease and the
ConfigMap of the documents OPA loads at start), the Pushgateway (bench/fleet_setup.py). Then,
for each fleet size (growing the same cluster):

1. creates the fake 8-GPU H100 nodes through the API (kwok keeps them Ready) and ~10 pods per
   node, bound and Running (8 one-GPU pods of ten teams' training, notebook and inference work,
   plus 2 CPU pods), written straight into etcd (`--create etcd`, the default: 100,000 pods in
   about a minute) or through the API (`--create api`: a create and a status write each);
2. waits until the API server lists every pod Running and every node Ready (a condition that
   holds at any size; kwok's CPU, which the bench used to wait on, never settled at 5,000),
   from a watch cache caught up with etcd, which the pods written straight into it leave
   behind for a while (fleet_setup.py: the first pass's lists must not race it);
3. backfills Prometheus with DCGM series (utilisation and framebuffer, one sample a minute over
   the idle window) for every GPU pod: most busy, one in 400 idle, half of those already warned
   past their grace, so the first pass warns some and reclaims others;
4. times `fleetplane controller reconcile` in a child process, `--passes` times, and prints each
   pass's figures: every phase the pass reports, its peak memory (VmHWM), its Kubernetes API and
   OPA requests, the CPU seconds the controller, kube-apiserver, etcd, Prometheus and OPA used
   meanwhile, the API server's GC cycles and the load average. A pass that exits non-zero is
   printed as a failed measurement (with its errors), not a figure, and the bench exits 1.

`--cluster-dir DIR` keeps the cluster running and its state in DIR: the next run creates only
what is missing. A kept cluster's pass time is fixed at its creation (pods' idle annotations and
the backfill depend on it). `--decode-only` also compares decoding listed pods through the
official client's models against raw JSON (bench/decode_compare.py). Figures only: nothing here
asserts timing. Measured figures are in docs/scale.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from decode_compare import measure_decoding
from fleet_setup import (
    SYSTEM_NAMESPACE,
    etcd_url,
    product_opa,
    pushgateway,
    wait_for_fleet,
    write_pods_to_etcd,
)

from controller.errors import ConflictError, TemporaryError
from controller.observe.kube import KubeClient
from fleet import labels as keys
from localfleet.controlplane import LocalCluster
from localfleet.fakenodes import FakePool, fake_nodes
from localfleet.servers import OpaServer, PrometheusServer, Sample, cpu_seconds

ROOT = Path(__file__).resolve().parent.parent

TEAMS = [f"team-{i}" for i in range(10)]
WINDOW, GRACE, SCRAPE = 600, 300, 60
IDLE_EVERY = 400  # one GPU pod in 400 is idle (0.25 %); half of those are past their grace
GPU_PODS_PER_NODE = 8
TARGET_SECONDS, TARGET_BYTES = 5.0, 1 << 30


def log(message: str) -> None:
    print(f"[bench] {message}", flush=True)


def config_document() -> dict[str, Any]:
    from fleet.config import load_stack_config
    from fleet.project import stack_file
    from fleet.render import render_opa_data

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


def running_status(pod: dict[str, Any]) -> dict[str, Any]:
    """The status kwok's `pod-ready` Stage writes (phase Running, Ready conditions, container
    statuses), written by the bench itself right after the create so the pass never waits for
    kwok to catch up. No IPs: kwok may already have queued its Stage for the pod while it was
    Pending, and its patch adds its own pod and host IP, which the API server rejects next to a
    second one of the same family ("may specify no more than one IP for each IP family"); kwok
    then retried forever, about 0.9 core of kwok and as much of the API server at 50,000 pods,
    under every measurement. Without IPs here its patch simply fills them in."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": kind, "status": "True", "lastTransitionTime": now}
                for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c["image"],
                    "imageID": "",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
                for c in pod["spec"]["containers"]
            ],
            "startTime": now,
        }
    }


Item = tuple[str, dict[str, Any], dict[str, Any] | None]


def create_all(client: KubeClient, items: list[Item], threads: int = 16) -> None:
    """POST each object (409 AlreadyExists is fine), then merge-patch its /status when given."""

    def create(item: Item) -> None:
        path, body, status = item
        for attempt in range(5):
            try:
                with contextlib.suppress(ConflictError):
                    client.create(path, body)
                if status is not None:
                    name = body["metadata"]["name"]
                    client.merge_patch(f"{path}/{name}/status", status)
                return
            except TemporaryError:
                if attempt == 4:
                    raise
                time.sleep(0.5 * (attempt + 1))

    with ThreadPoolExecutor(max_workers=threads) as pool_:
        list(pool_.map(create, items, chunksize=64))


def existing_names(client: KubeClient, path: str) -> set[str]:
    """namespace/name of every object already listed at `path` (a kept cluster's leftovers)."""
    found: set[str] = set()
    for page in client.list_pages(path, limit=5000, params={"resourceVersion": "0"}):
        for item in page:
            metadata = item["metadata"]
            found.add(f"{metadata.get('namespace', '')}/{metadata['name']}")
    return found


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


def server_pids(
    cluster: LocalCluster, opa: OpaServer, prometheus: PrometheusServer
) -> dict[str, int]:
    """The processes that serve a pass, by the name the figures use."""
    pids = {name: pid for name, pid in cluster.running_pids().items()}
    for name, server in (("opa", opa), ("prometheus", prometheus)):
        process = server._process  # the bench reads its own servers' pids
        if process is not None and process.proc is not None:
            pids[name] = process.proc.pid
    return {
        name: pids[name] for name in ("kube-apiserver", "etcd", "prometheus", "opa") if name in pids
    }


@contextlib.contextmanager
def stopped(pid: int | None) -> Iterator[None]:
    """The process `pid` stopped (SIGSTOP) inside the block, continued after; None: nothing."""
    if pid is not None:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGCONT)


_BYTECODE: dict[str, str] = {}


def product_bytecode() -> dict[str, str]:
    """The pass's environment, with the project's modules byte-compiled ahead as the image has
    them (images/build.py runs compileall): a shell that sets PYTHONDONTWRITEBYTECODE would
    otherwise make every pass compile the controller from source (about 0.4 CPU-s of a pass).
    The bytecode goes to a cache prefix outside the checkout, kept between runs, and the pass
    may write to it: a prefix redirects every module's bytecode, the standard library's and
    the dependencies' too, so a fresh prefix per run made each pass compile the ~200 modules
    outside the project it imports (0.3-0.5 CPU-s of a pass at 100,000 pods, none of which an
    image spends). Only a run's first pass on a new cache pays that."""
    if not _BYTECODE:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        prefix = Path(cache) / "fleetplane" / "bench-pyc"
        prefix.mkdir(parents=True, exist_ok=True)
        env["PYTHONPYCACHEPREFIX"] = str(prefix)
        packages = [str(ROOT / name) for name in ("controller", "fleet", "fleetplane")]
        subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], env=env, check=False)
        _BYTECODE.update(env)
    return _BYTECODE


def timed_pass(
    config: Path,
    kubeconfig: Path,
    opa: str,
    prometheus: str,
    pass_at: float,
    *,
    dry_run: bool,
    token_file: Path,
    pushgateway: str,
    profile: Path | None = None,
    servers: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Run one pass in a child process; its figures, with the CPU seconds the controller and
    each of `servers` (name: pid) used meanwhile (less sensitive to a busy machine than wall
    time)."""
    env = product_bytecode()
    started = time.perf_counter()
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    servers_before = {name: cpu_seconds(pid) for name, pid in (servers or {}).items()}
    profiler = ["-m", "cProfile", "-o", str(profile)] if profile is not None else []
    result = subprocess.run(
        [
            sys.executable,
            *profiler,
            "-m",
            "fleetplane",
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
            "--opa-token-file",
            str(token_file),
            "--pushgateway",
            pushgateway,
            "--lease-namespace",
            "default",
            "--now",
            str(pass_at),
            "--scrape-interval",
            str(SCRAPE),
            "--log-level",
            "warning",
            *(["--dry-run"] if dry_run else []),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = {
        "controller": round(
            children_after.ru_utime
            + children_after.ru_stime
            - children_before.ru_utime
            - children_before.ru_stime,
            2,
        )
    }
    for name, pid in (servers or {}).items():
        cpu[name] = round(cpu_seconds(pid) - servers_before[name], 2)
    summary_line = next(
        (line for line in result.stdout.splitlines() if line.startswith("SUMMARY ")), None
    )
    summary = json.loads(summary_line.removeprefix("SUMMARY ")) if summary_line else {}
    return {
        "exit": result.returncode,
        "wall": wall,
        "pass": summary.get("last_pass_duration_seconds"),
        # The pass's own VmHWM (controller.summary.peak_memory_bytes); the children's
        # ru_maxrss would report this process's peak, since a vforked child inherits it.
        "peak_bytes": summary.get("peak_memory_bytes"),
        "api_requests": summary.get("api_requests"),
        "summary": summary,
        "cpu": cpu,
        "stderr": result.stderr[-2000:],
        "errors": [
            line
            for line in result.stdout.splitlines() + result.stderr.splitlines()
            if '"level": "error"' in line or '"level":"error"' in line
        ][-5:],
    }


def apiserver_gc_cycles(client: KubeClient) -> int:
    """Garbage collections the kube-apiserver's Go runtime has finished (its /metrics). At
    50,000 pods its live heap is over a GiB, and a cycle that lands in a pass costs it several
    CPU seconds on this machine's two cores, whatever the controller does: counted per pass so
    that the figures can be read with and without one."""
    text = client.request("GET", "/metrics", raw=True).decode()
    for line in text.splitlines():
        if line.startswith("go_gc_duration_seconds_count "):
            return int(float(line.split()[-1]))
    raise SystemExit("kube-apiserver /metrics has no go_gc_duration_seconds_count")


def phases_of(summary: dict[str, Any]) -> dict[str, float]:
    """`phase_seconds{phase=observe}` and the like, by phase."""
    prefix = "phase_seconds{phase="
    return {k[len(prefix) : -1]: v for k, v in summary.items() if k.startswith(prefix)}


def cluster_for(args: argparse.Namespace, work: Path) -> tuple[LocalCluster, bool]:
    """A fresh cluster in `work`, or the one kept running in --cluster-dir (started there when
    none runs). The second value says whether the cluster was already up."""
    if args.cluster_dir is None:
        return LocalCluster(data_dir=work / "cluster"), False
    kept = LocalCluster(data_dir=args.cluster_dir, keep=True, detach=True)
    if kept.running_pids():
        return kept, True
    if args.cluster_dir.exists():
        shutil.rmtree(args.cluster_dir)
    return kept, False


def grow(
    client: KubeClient,
    size: int,
    pods_per_node: int,
    pass_at: float,
    threads: int,
    etcd: str | None,
) -> tuple[int, int]:
    """Create the nodes and pods of a `size`-node fleet that are missing (a kept cluster
    already has most of them; a pass may have reclaimed a few): the nodes through the API,
    the pods straight into etcd (`etcd`, fleet_setup.py) or, without it, through the API (a
    create and a status write each). Returns (nodes, pods) made."""
    t = time.monotonic()
    have_nodes = existing_names(client, "/api/v1/nodes")
    nodes = [n for n in pool(0, size) if f"/{n['metadata']['name']}" not in have_nodes]
    create_all(client, [("/api/v1/nodes", node, None) for node in nodes], threads=threads)
    seconds = time.monotonic() - t
    log(
        f"{size} nodes: created {len(nodes)} missing nodes in {seconds:.0f}s "
        f"({len(nodes) / max(seconds, 1e-9):.0f}/s)"
    )
    t = time.monotonic()
    have_pods = existing_names(client, "/api/v1/pods")
    missing = [
        (index * pods_per_node + i, pod)
        for index in range(size)
        for i, pod in enumerate(pods_for(index, pods_per_node, pass_at))
        if f"{pod['metadata']['namespace']}/{pod['metadata']['name']}" not in have_pods
    ]
    if etcd is not None:
        write_pods_to_etcd(etcd, missing)
        how = "straight to etcd"
    else:
        items: list[Item] = [
            (f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", pod, running_status(pod))
            for _, pod in missing
        ]
        create_all(client, items, threads=threads)
        how = "through the API"
    seconds = time.monotonic() - t
    log(
        f"{size} nodes: created {len(missing)} missing pods (Running) {how} in "
        f"{seconds:.0f}s ({len(missing) / max(seconds, 1e-9):.0f}/s), load "
        f"{os.getloadavg()[0]:.1f}"
    )
    return len(nodes), len(missing)


def prometheus_for(
    work: Path, size: int, pods_per_node: int, pass_at: float
) -> tuple[PrometheusServer, float]:
    """A Prometheus backfilled for this fleet size; a kept directory is backfilled once."""
    t = time.monotonic()
    directory = work / f"prometheus-{size}-{pods_per_node}"
    marker = directory / "backfilled"
    prometheus = PrometheusServer(work_dir=directory)
    if marker.exists():
        prometheus.start(timeout=600)
    else:
        prometheus.start(samples_for(size, pods_per_node, pass_at), timeout=600)
        marker.write_text(str(pass_at))
    log(f"{size} nodes: prometheus ready in {time.monotonic() - t:.0f}s")
    return prometheus, time.monotonic() - t


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--nodes", default="2000,5000", help="fleet sizes, growing (default 2000,5000)"
    )
    parser.add_argument("--pods-per-node", type=int, default=10)
    parser.add_argument(
        "--decode-only", action="store_true", help="also measure decoding (typed vs raw)"
    )
    parser.add_argument(
        "--cluster-dir",
        type=Path,
        help="keep the cluster, OPA data and Prometheus TSDBs here and reuse them on the next "
        "run (only missing objects are created); stop it with "
        "`fleetplane cluster --dir DIR down`",
    )
    parser.add_argument("--passes", type=int, default=1, help="passes per size")
    parser.add_argument("--threads", type=int, default=32, help="parallel creates")
    parser.add_argument(
        "--create",
        choices=("etcd", "api"),
        default="etcd",
        help="write the pods straight to etcd (default; minutes for 100,000) or create them "
        "through the API (a create and a status write each)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="pass with --dry-run (no warnings or reclaims)"
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="run each pass under cProfile and write DIR/pass-<nodes>-<n>.prof (the profiler "
        "slows the pass: its times are not the figures to quote)",
    )
    parser.add_argument(
        "--pause-kwok",
        action="store_true",
        help="stop kwok (SIGSTOP) for the length of each timed pass: it stands in for the "
        "kubelets of every fake node (node Leases, pod status), work a real cluster's kubelets "
        "do on their own machines",
    )
    return parser.parse_args()


def report(figures: dict[str, Any], attempt: int, pause_kwok: bool) -> None:
    """One pass's log line: every phase, peak memory, API and OPA requests, CPU seconds of
    the controller and each server; a pass that exited non-zero is a failed measurement."""
    summary = figures["summary"]
    phases = {k: round(v, 2) for k, v in phases_of(summary).items()}
    failed = f"FAILED (exit {figures['exit']}), not a figure: " if figures["exit"] else ""
    log(
        f"{figures['size']} nodes, pass {attempt}: {failed}wall {figures['wall']:.2f}s, pass "
        f"{figures['pass'] or float('nan'):.2f}s, phases {phases}, peak "
        f"{(figures['peak_bytes'] or 0) / 2**20:.0f} MiB, API requests "
        f"{figures['api_requests']}, load before "
        f"{figures['load']:.1f}; CPU s {figures['cpu']} (of which controller GC "
        f"{summary.get('gc_seconds')}); API server GC cycles {figures['apiserver_gc_cycles']}"
        f"{'; kwok paused' if pause_kwok else ''}"
    )
    if figures["exit"]:
        log("errors: " + " | ".join(figures["errors"]) or figures["stderr"])


def table(results: list[dict[str, Any]]) -> None:
    """Every pass, failed ones marked (their figures are not measurements)."""
    print()
    print(
        f"{'nodes':>6} {'pods':>7} {'pass':>4} {'exit':>4} {'wall s':>7} {'pass s':>7} "
        f"{'observe':>7} {'admiss.':>7} {'spend':>6} {'peak MiB':>8} {'API req':>7} "
        f"{'ctl CPU':>7} {'api CPU':>7} {'opa CPU':>7} {'load':>5}"
    )
    for f in results:
        phases = phases_of(f["summary"])
        cpu = f["cpu"]
        print(
            f"{f['size']:>6} {f['pods']:>7} {f['attempt']:>4} {f['exit']:>4} {f['wall']:>7.2f} "
            f"{f['pass'] or float('nan'):>7.2f} {phases.get('observe', float('nan')):>7.2f} "
            f"{phases.get('admission', float('nan')):>7.2f} "
            f"{phases.get('spend', float('nan')):>6.2f} "
            f"{(f['peak_bytes'] or 0) / 2**20:>8.0f} {f['api_requests'] or 0:>7} "
            f"{cpu.get('controller', 0):>7.2f} {cpu.get('kube-apiserver', 0):>7.2f} "
            f"{cpu.get('opa', 0):>7.2f} {f['load']:>5.1f}"
        )
    print(f"target: 5,000 nodes in <= 3 s, 10,000 in <= {TARGET_SECONDS:.0f} s, <= 1 GiB")


def main() -> int:
    args = parse_args()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    sizes = [int(n) for n in args.nodes.split(",")]
    work = args.cluster_dir or Path(tempfile.mkdtemp(prefix="fleetplane-bench-"))
    cluster, attached = cluster_for(args, work)
    state_dir = work / "bench-state"
    state_dir.mkdir(parents=True, exist_ok=True)
    document = config_document()
    config = state_dir / "config.json"
    config.write_text(json.dumps(document))
    opa, token_file = product_opa(state_dir, document)
    gateway = pushgateway(state_dir)
    setup_started = time.monotonic()
    if not attached:
        cluster.start()
    results: list[dict[str, Any]] = []
    try:
        opa.start()
        gateway.start()
        client = KubeClient.from_kubeconfig(str(cluster.kubeconfig), timeout=120, pool=64)
        namespaces = [*TEAMS, SYSTEM_NAMESPACE]
        create_all(
            client, [("/api/v1/namespaces", {"metadata": {"name": ns}}, None) for ns in namespaces]
        )
        # One time for every pod's idle window: the pass runs as if after the window. A kept
        # cluster keeps its time, since the pods' annotations and the backfill depend on it.
        stamp = state_dir / "pass_at"
        pass_at = float(stamp.read_text()) if stamp.exists() else time.time() + WINDOW + 3600
        stamp.write_text(repr(pass_at))
        etcd = etcd_url(cluster) if args.create == "etcd" else None
        for size in sizes:
            phase = time.monotonic()
            grow(client, size, args.pods_per_node, pass_at, args.threads, etcd)
            wait_for_fleet(client, size, size * args.pods_per_node, log=log)
            prometheus, _ = prometheus_for(state_dir, size, args.pods_per_node, pass_at)
            log(f"{size} nodes: setup {time.monotonic() - phase:.0f}s")
            try:
                if args.decode_only and size == sizes[0]:
                    measure_decoding(client, cluster.kubeconfig)
                for attempt in range(1, args.passes + 1):
                    load = os.getloadavg()
                    kwok = cluster.running_pids().get("kwok") if args.pause_kwok else None
                    cycles_before = apiserver_gc_cycles(client)
                    with stopped(kwok):
                        figures = timed_pass(
                            config,
                            cluster.kubeconfig,
                            opa.url,
                            prometheus.url,
                            pass_at,
                            dry_run=args.dry_run,
                            token_file=token_file,
                            pushgateway=gateway.url,
                            profile=(
                                args.profile / f"pass-{size}-{attempt}.prof"
                                if args.profile
                                else None
                            ),
                            servers=server_pids(cluster, opa, prometheus),
                        )
                    figures["load"] = load[0]
                    figures["apiserver_gc_cycles"] = apiserver_gc_cycles(client) - cycles_before
                    figures.update(size=size, pods=size * args.pods_per_node, attempt=attempt)
                    report(figures, attempt, args.pause_kwok)
                    results.append(figures)
            finally:
                prometheus.stop()
            actions = {k: v for k, v in figures["summary"].items() if k.startswith("actions")}
            log(f"{size} nodes: actions of the last pass {actions}")
        table(results)
        print(f"total setup and measurement: {time.monotonic() - setup_started:.0f}s")
    finally:
        opa.stop()
        gateway.stop()
        if args.cluster_dir is not None:
            log(
                f"cluster left running: KUBECONFIG={cluster.kubeconfig}; stop it with "
                f"`fleetplane cluster --dir {cluster.data_dir} down`"
            )
        else:
            cluster.stop()
            shutil.rmtree(work, ignore_errors=True)
    return 1 if any(f["exit"] for f in results) else 0


if __name__ == "__main__":
    sys.exit(main())
