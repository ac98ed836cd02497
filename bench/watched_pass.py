"""Passes at fleet scale with pods and nodes listed, and with them read from a watched copy
(controller/observe/watched.py): what keeping them by watch saves a long-running process and
the API server.

    python bench/controller_pass.py --nodes 10000 --passes 1 --cluster-dir DIR   # the fleet
    python bench/watched_pass.py --cluster-dir DIR [--passes 3] [--concerns admission|all]

Runs against the cluster bench/controller_pass.py made and left running in DIR, with its
configuration (DIR/bench-state/config.json), OPA started as the gate's (bench/fleet_setup.py)
and, for `--concerns all`, its backfilled Prometheus. In this process, as the admission keeper
does (controller/admission_keeper.py):

1. starts the watched copy of pods and nodes and times its first list: the keeper's one list
   at its start;
2. runs `--passes` passes of each kind, alternating: one that lists pods and nodes (what every
   keeper pass did before, and what every CronJob pass does) and one that reads the watched
   copy. `--concerns admission` (the default) runs the keeper's pass (records, reservations,
   approval bindings; no team metrics, which the keeper does not publish); `all` runs the
   whole registry with the team metrics, as a reconcile pass does, here in a process that
   keeps running (what a resident controller's pass would cost);
3. prints each pass: its phases and wall time, this process's CPU (the watch threads
   included) and peak memory, and the CPU seconds of kube-apiserver, etcd, OPA and Prometheus
   meanwhile (kwok paused, as bench/controller_pass.py --pause-kwok does).
   A pass with errors is printed with them, as a failed measurement, and the bench exits 1.
   Figures only: nothing here asserts timing.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from controller_pass import SCRAPE, phases_of, prometheus_for, stopped
from fleet_setup import product_opa

from controller.admission_keeper import LEASE_SUFFIX
from controller.config import Settings, parse_config
from controller.log import Log
from controller.observe.kube import KubeClient
from controller.observe.watched import WatchedFleet
from controller.reconcile import run_pass
from controller.summary import peak_memory_bytes
from localfleet.controlplane import LocalCluster
from localfleet.servers import cpu_seconds


def peak_mib() -> float:
    return peak_memory_bytes() / 2**20


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def measured(servers: dict[str, int], run: Any) -> dict[str, Any]:
    """Run `run()`; its value, wall seconds, this process's CPU and each server's CPU."""
    before = {name: cpu_seconds(pid) for name, pid in servers.items()}
    cpu, wall = time.process_time(), time.perf_counter()
    value = run()
    figures: dict[str, Any] = {
        "value": value,
        "wall": round(time.perf_counter() - wall, 2),
        "cpu": {"process": round(time.process_time() - cpu, 2)},
    }
    for name, pid in servers.items():
        figures["cpu"][name] = round(cpu_seconds(pid) - before[name], 2)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cluster-dir", type=Path, required=True)
    parser.add_argument("--passes", type=int, default=3, help="passes of each kind")
    parser.add_argument("--concerns", choices=("admission", "all"), default="admission")
    parser.add_argument("--pods-per-node", type=int, default=10, help="as the fleet was made")
    args = parser.parse_args()
    cluster = LocalCluster(data_dir=args.cluster_dir, keep=True, detach=True)
    pids = cluster.running_pids()
    if "kube-apiserver" not in pids:
        raise SystemExit(f"no cluster runs in {args.cluster_dir}: make one with controller_pass")
    state_dir = args.cluster_dir / "bench-state"
    document = json.loads((state_dir / "config.json").read_text())
    pass_at = float((state_dir / "pass_at").read_text())
    opa, token_file = product_opa(state_dir, document)
    opa.start()
    prometheus = None
    failed = False
    stop = threading.Event()
    try:
        assert opa._process is not None and opa._process.proc is not None
        servers: dict[str, int] = {n: pids[n] for n in ("kube-apiserver", "etcd") if n in pids}
        servers["opa"] = opa._process.proc.pid
        prometheus_url = "http://127.0.0.1:9"  # the admission concern reads no metrics
        if args.concerns == "all":
            nodes = len(KubeClient.from_kubeconfig(str(cluster.kubeconfig)).list("/api/v1/nodes"))
            prometheus, _ = prometheus_for(state_dir, nodes, args.pods_per_node, pass_at)
            prometheus_url = prometheus.url
            assert prometheus._process is not None and prometheus._process.proc is not None
            servers["prometheus"] = prometheus._process.proc.pid
        client = KubeClient.from_kubeconfig(str(cluster.kubeconfig), timeout=120, pool=64)
        fleet = parse_config(document)
        # what the CronJob's passes get from bench/controller_pass.py's command line
        settings = Settings.from_config(
            fleet,
            prometheus_url=prometheus_url,
            opa_url=opa.url,
            opa_token_file=str(token_file),
            lease_namespace="default",
            scrape_interval_seconds=SCRAPE,
        )
        if args.concerns == "admission":  # the keeper's own Lease
            settings = replace(settings, lease_name=settings.lease_name + LEASE_SUFFIX)
        logging.basicConfig(level=logging.WARNING)
        log = Log()
        rss = rss_mib()
        started = measured(servers, lambda: WatchedFleet.start(client, log=log, stop=stop))
        watched: WatchedFleet = started["value"]
        if watched.problem():
            raise SystemExit(f"the watched copy failed: {watched.problem()}")
        print(
            f"first list of the watched copy: {started['wall']} s, CPU {started['cpu']}, "
            f"{len(watched.pods.items())} accelerator pods and {len(watched.nodes.items())} "
            f"nodes kept in {rss_mib() - rss:.0f} MiB",
            flush=True,
        )
        concerns = ("admission",) if args.concerns == "admission" else None
        rows = []
        for attempt in range(1, args.passes + 1):
            for kind, source in (("listed", None), ("watched", watched)):
                kwok = cluster.running_pids().get("kwok")  # paused, as controller_pass does
                with stopped(kwok):
                    figures = measured(
                        servers,
                        lambda source=source: run_pass(
                            kube=client,
                            fleet=fleet,
                            settings=settings,
                            concerns=concerns,
                            now=pass_at,
                            log=log,
                            watched=source,
                            team_metrics=concerns is None,
                        ),
                    )
                result = figures.pop("value")
                phases = phases_of(result.as_dict())
                errors = result.errors
                failed |= bool(errors)
                row = {"kind": kind, "attempt": attempt, **figures, "phases": phases}
                row["peak_mib"] = round(peak_mib())
                row["errors"] = errors
                row["api_requests"] = result.get("api_requests")
                print(json.dumps(row), flush=True)
                rows.append(row)
        shown = sorted({phase for row in rows for phase in row["phases"]})
        print(
            "| pass | kind | wall s | "
            + " | ".join(f"{phase} s" for phase in shown)
            + " | API requests | CPU-s: this process | API server | etcd | OPA | Prometheus "
            "| errors |"
        )
        print("| --- " * (len(shown) + 10) + "|")
        for row in rows:
            cpu = row["cpu"]
            print(
                f"| {row['attempt']} | {row['kind']} | {row['wall']} | "
                + " | ".join(str(row["phases"].get(phase, "-")) for phase in shown)
                + f" | {row['api_requests']} | {cpu['process']} | {cpu.get('kube-apiserver', '-')} | "
                f"{cpu.get('etcd', '-')} | {cpu['opa']} | {cpu.get('prometheus', '-')} | "
                f"{row['errors']} |"
            )
        print(f"peak memory of this process: {peak_mib():.0f} MiB")
    finally:
        stop.set()
        opa.stop()
        if prometheus is not None:
            prometheus.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
