"""How long the placement service takes to answer Volcano's extender (docs/placement.md).

    python bench/placement_latency.py [--scale 1 10] [--calls 30] [--session-pods 100]

The trace's GPU node list (1,213 nodes) is half filled by the replay's FGD with pods of the
default list (every pod a task on its node, as Volcano's cache holds it), then pods of the list
are scored one call each on every node they fit on, as vc-scheduler's `PrioritizeRequest`
carries them: `NodeInfo` with its `v1.Node` and its tasks' `v1.Pod`s, in the shape Go's
encoding/json writes (fields a real cluster adds, managed fields and images, are approximated
by a fixed padding per object, stated below). `--scale 10` repeats the node list ten times
(12,130 nodes). Each call is timed in the service's own code (reading the JSON, reading the
nodes, scoring, writing the answer) and, for a few calls, over HTTP against the service
running as a process. A session places its pending pods one after another (allocate scores
each task on the nodes then), so a session's extender time is the sum over its pods:
`--session-pods` of them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import simdjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fleet import labels
from localfleet.placement import PlacementServer
from placement import fgd
from placement.service import Scorer
from placement.volcano_json import read_nodes, read_task
from placement.workload import Workload, read_seed
from replay.pack import policies
from replay.pack.cluster import Cluster
from replay.pack.fragmentation import Fragmentation, typical_pods
from replay.pack.realcheck import node_manifest, pod_manifest
from replay.trace import (
    DEFAULT_TRACE_DIR,
    PodRequest,
    TraceNode,
    read_pod_requests,
)
from replay.trace import read_nodes as trace_nodes

TRACE = Path(DEFAULT_TRACE_DIR)
PADDING = 1500
"""Characters added to every Node and Pod for what a real cluster's objects carry beyond the
check's manifests (managed fields, status conditions, images): about 3 KB per node and 2.5 KB
per pod in all, a modest cluster's."""


def resource(cpu: float, memory: float, gpus: float) -> dict[str, Any]:
    scalars = {labels.GPU_RESOURCE: gpus * 1000} if gpus else None
    return {"MilliCPU": cpu, "Memory": memory, "ScalarResources": scalars, "MaxTaskNum": 0}


def task_info(pod: PodRequest, node: str) -> dict[str, Any]:
    manifest = pod_manifest(pod, namespace="bench", queue="bench", run="bench")
    manifest["metadata"]["uid"] = f"uid-{pod.name}-{node}"
    manifest["metadata"]["annotations"]["padding"] = "x" * PADDING
    manifest["spec"]["nodeName"] = node
    manifest["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    req = resource(pod.cpu_milli, pod.memory_mib << 20, pod.num_gpu)
    return {
        "UID": manifest["metadata"]["uid"],
        "Job": "bench/pg",
        "Name": pod.name,
        "Namespace": "bench",
        "Resreq": req,
        "InitResreq": req,
        "NodeName": node,
        "Status": 3,
        "Priority": 0,
        "Pod": manifest,
    }


def node_info(node: TraceNode, name: str, c: Cluster, i: int, tasks: list[Any]) -> dict[str, Any]:
    manifest = node_manifest(node, "bench")
    manifest["metadata"]["name"] = name
    manifest["metadata"]["annotations"]["padding"] = "x" * PADDING
    gpus = int(c.gpus[i])
    free = int(c.free_gpus[i])
    idle = resource(float(c.cpu_left[i]), float(c.memory_left[i]) * (1 << 20), free)
    cap = resource(float(c.cpu_capacity[i]), float(c.memory_capacity[i]) * (1 << 20), gpus)
    used = resource(
        float(c.cpu_capacity[i] - c.cpu_left[i]),
        float(c.memory_capacity[i] - c.memory_left[i]) * (1 << 20),
        gpus - free,
    )
    return {
        "Name": name,
        "Node": manifest,
        "State": {"Phase": "Ready", "Reason": ""},
        "Releasing": resource(0, 0, 0),
        "Pipelined": resource(0, 0, 0),
        "Idle": idle,
        "Used": used,
        "Allocatable": cap,
        "Capacity": cap,
        "ResourceUsage": {"CPUUsageAvg": {}, "MEMUsageAvg": {}},
        "Tasks": {t["UID"]: t for t in tasks},
        "Others": {},
        "ImageStates": {},
        "Generation": 1,
    }


def half_full(pods: list[PodRequest], nodes: list[TraceNode]) -> tuple[Cluster, dict[int, list]]:
    """The cluster half filled by the replay's FGD with whole-GPU and CPU-only pods (Volcano
    sees no shares), and the pods on each node."""
    rng = np.random.default_rng(42)
    c = Cluster(nodes)
    frag = Fragmentation(c, typical_pods(pods))
    ctx = policies.Context(cluster=c, rng=rng, fragmentation=frag)
    on: dict[int, list[PodRequest]] = {}
    for i in rng.permutation(len(pods)):
        if c.allocated_milli >= c.capacity_milli // 2:
            break
        if pods[i].shared:
            continue
        d = c.demand(pods[i])
        fit = c.fitting(d)
        if len(fit):
            node, gpus = policies.fgd(ctx, d, c.distinct(fit))
            c.place(node, d, gpus)
            frag.update(node)
            on.setdefault(node, []).append(pods[i])
    return c, on


def requests(scale: int, calls: int) -> list[bytes]:
    pods = read_pod_requests(TRACE / "openb_pod_list_default.csv")
    nodes = trace_nodes(TRACE / "openb_node_list_gpu_node.csv")
    c, on = half_full(pods, nodes)
    by_name = {n.name: n for n in nodes}
    infos = []
    for copy in range(scale):
        for i, name in enumerate(c.names):
            tname = name if copy == 0 else f"{name}-{copy}"
            tasks = [task_info(p, tname) for p in on.get(i, [])]
            infos.append(node_info(by_name[name], tname, c, i, tasks))
    rng = np.random.default_rng(7)
    asked = [pods[i] for i in rng.choice(len(pods), size=4 * calls) if not pods[i].shared]
    out = []
    for pod in asked[:calls]:
        d = c.demand(pod)
        fit = set(c.fitting(d).tolist())
        candidates = [info for k, info in enumerate(infos) if k % len(c.names) in fit]
        out.append(orjson.dumps({"task": task_info(pod, ""), "nodes": candidates}))
    return out


def timed(scorer: Scorer, body: bytes) -> dict[str, float]:
    """One call through the service's own code (`Scorer.answer`), and its parts again one by
    one: parsing, reading the task and nodes, scoring; wall and CPU seconds."""
    w0, c0 = time.perf_counter(), time.process_time()
    scorer.answer(body)
    w1, c1 = time.perf_counter(), time.process_time()
    parsed: Any = simdjson.Parser().parse(body)
    w2 = time.perf_counter()
    task = read_task(parsed["task"])
    table = read_nodes(parsed["nodes"], shares=False)
    w3 = time.perf_counter()
    typical = scorer.workload.typical()
    fgd.scores(typical, table.for_typical(typical), task.demand)
    w4 = time.perf_counter()
    del parsed
    return {
        "call": w1 - w0,
        "cpu": c1 - c0,
        "decode": w2 - w1,
        "read": w3 - w2,
        "score": w4 - w3,
        "nodes": len(table.names),
        "bytes": len(body),
    }


def over_http(url: str, bodies: list[bytes]) -> list[float]:
    out = []
    for body in bodies:
        req = urllib.request.Request(
            url + "/prioritize", data=body, headers={"Content-Type": "application/json"}
        )
        t0 = time.perf_counter()
        with urllib.request.urlopen(req, timeout=60) as response:
            response.read()
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=int, nargs="+", default=[1, 10])
    p.add_argument("--calls", type=int, default=30)
    p.add_argument("--http-calls", type=int, default=5)
    p.add_argument("--session-pods", type=int, default=100)
    args = p.parse_args()
    scorer = Scorer(Workload(read_seed()))
    print(
        "| nodes | candidates (median) | request MB (median) | decode ms | read ms | score ms "
        "| call ms (p50 / p95) | call CPU ms (p50) | over HTTP ms (p50) | session of "
        f"{args.session_pods} pods s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for scale in args.scale:
        bodies = requests(scale, args.calls)
        runs = [timed(scorer, b) for b in bodies]
        calls = sorted(r["call"] for r in runs)
        p95 = calls[min(len(calls) - 1, int(0.95 * len(calls)))]
        with PlacementServer() as service:
            http = over_http(service.url, bodies[: args.http_calls])

        def med(key: str, runs: list[dict[str, float]] = runs) -> float:
            return statistics.median(r[key] for r in runs)

        print(
            f"| {1213 * scale:,} | {med('nodes'):,.0f} | {med('bytes') / 1e6:.1f} "
            f"| {1000 * med('decode'):.0f} | {1000 * med('read'):.0f} "
            f"| {1000 * med('score'):.0f} | {1000 * statistics.median(calls):.0f} / "
            f"{1000 * p95:.0f} | {1000 * med('cpu'):.0f} | {1000 * statistics.median(http):.0f} "
            f"| {args.session_pods * statistics.median(calls):.1f} |"
        )
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
