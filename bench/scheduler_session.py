"""The real vc-scheduler's session time with and without the placement service (issue 35,
docs/placement.md "Latency").

    python bench/scheduler_session.py [--nodes 1213] [--pods 200] [--period 1s]

Starts the local fleet's control plane (KWOK) and the pinned Volcano (localfleet), creates
KWOK nodes of the trace's GPU node list (all 1,213 by default, `--nodes N` a seeded subset)
and submits a seeded sample of the default pod list one pod after another, each waiting until
Volcano binds it or declares it unschedulable (pack mode's real-scheduler check,
replay/pack/realcheck.py). It does so twice, with the same nodes and pods: with the shipped
configuration (`volcano.placement: volcano`), then with `volcano.placement: fgd`, the
extender calling the placement service running as a process (localfleet.placement).

Figures come from vc-scheduler's own metrics endpoint (its `--listen-address`), scraped
before every pod is submitted: a pod's window then holds the sessions that saw it. Where a
window holds exactly one session (half to two thirds do at one session a second; others also
hold a session that ran before the pod's PodGroup was there or after its binding), that
session is the one that placed the pod, and the histograms'
sums give its exact times: the session (`volcano_e2e_scheduling_latency_milliseconds`), its
opening (snapshot: `volcano_open_session_duration_milliseconds`), its allocate action
(`volcano_action_scheduling_latency_milliseconds{action="allocate"}`) and the scoring of the
pod's candidate nodes, the extender's call included
(`volcano_scheduling_stage_duration_milliseconds{stage="Scoring"}`). Sessions with nothing to
place are measured first (`--idle-seconds`). The service's own time per call comes from its
/metrics (`fleetplane_placement_request_seconds`, quantiles interpolated in its buckets).
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controller.errors import NotFoundError, TemporaryError
from controller.observe.kube import KubeClient, namespace_path
from fleet.config import FleetConfig, load_stack_config, parse_fleet
from fleet.placement import METRICS_PATH
from fleet.project import stack_file
from localfleet.controlplane import ClusterError, LocalCluster
from localfleet.placement import PlacementServer
from localfleet.processes import ServerError
from localfleet.servers import cpu_seconds
from localfleet.volcano import SCHEDULE_PERIOD, LocalVolcano
from replay.pack import realcheck
from replay.trace import (
    DEFAULT_NODE_FILE,
    DEFAULT_TRACE_DIR,
    PodRequest,
    TraceNode,
    read_nodes,
    read_pod_requests,
)

E2E = "volcano_e2e_scheduling_latency_milliseconds"
OPEN = "volcano_open_session_duration_milliseconds"
ACTION = "volcano_action_scheduling_latency_milliseconds"
STAGE = "volcano_scheduling_stage_duration_milliseconds"
SERVICE_SECONDS = "fleetplane_placement_request_seconds"
SERVICE_NODES = "fleetplane_placement_nodes_scored_total"
CONFIGURATIONS = ("shipped", "fgd")
LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# --- Prometheus' text format -------------------------------------------------------------


Series = dict[str, float]
"""`name{labels}` as the exporter writes it → value."""


def parse_metrics(text: str) -> Series:
    out: Series = {}
    for line in text.splitlines():
        match = LINE.match(line)
        if match and not line.startswith("#"):
            out[match[1] + (match[2] or "")] = float(match[3])
    return out


def scrape(url: str) -> Series:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return parse_metrics(response.read().decode())
    except (urllib.error.URLError, OSError) as error:
        raise ServerError(f"GET {url}: {error}") from error


def _labelled(key: str, name: str, labels: dict[str, str]) -> bool:
    return key.startswith(name + "{") and all(f'{k}="{v}"' in key for k, v in labels.items())


def value(series: Series, name: str, **labels: str) -> float:
    """The one series of `name` with these labels (0 when the exporter has none yet)."""
    if not labels:
        return series.get(name, 0.0)
    return sum(v for k, v in series.items() if _labelled(k, name, labels))


def delta(after: Series, before: Series) -> Series:
    return {k: v - before.get(k, 0.0) for k, v in after.items()}


def histogram_quantile(series: Series, name: str, q: float, **labels: str) -> float | None:
    """Prometheus' `histogram_quantile`: linear within the bucket holding the quantile."""
    bounds: list[tuple[float, float]] = []
    for key, count in series.items():
        if _labelled(key, name + "_bucket", labels):
            le = re.search(r'le="([^"]+)"', key)
            if le:
                bounds.append((float(le[1]), count))
    bounds.sort()
    if not bounds or bounds[-1][1] <= 0:
        return None
    rank = q * bounds[-1][1]
    lower, below = 0.0, 0.0
    for upper, count in bounds:
        if count >= rank:
            if upper == float("inf"):
                return lower
            return lower + (upper - lower) * (rank - below) / max(count - below, 1e-12)
        lower, below = upper, count
    return lower


# --- the run -----------------------------------------------------------------------------


class MeteredVolcano(LocalVolcano):
    """The local fleet's Volcano with vc-scheduler's metrics on, as the pinned chart runs it
    (`custom.scheduler_metrics_enable`, true by default, adds `--enable-metrics=true`): they
    are served on its `--listen-address`."""

    def command(self, name: str) -> list[str]:
        command = super().command(name)
        return [*command, "--enable-metrics=true"] if name == "vc-scheduler" else command


class ScrapingClient(KubeClient):
    """The check's Kubernetes client, scraping the scheduler's metrics just before each pod is
    created: realcheck.run_on_volcano submits pods through it, so every scrape opens the
    window of the pod about to be submitted."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.before_pod: Callable[[], None] = lambda: None

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("kind") == "Pod":
            self.before_pod()
        return super().create(path, body)


@dataclass(kw_only=True)
class Result:
    configuration: str
    pods: int
    placed: int = 0
    idle_sessions: int = 0
    idle_ms: float = 0.0
    lone: dict[str, list[float]] = field(default_factory=dict)
    """Per placed pod whose window held one session: session, open, allocate, scoring ms."""
    windows: int = 0
    scheduler_cpu: float = 0.0
    seconds: float = 0.0
    service: Series | None = None


def percentiles(values: Sequence[float]) -> str:
    if not values:
        return "n/a"
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return f"{p50:.0f} / {p90:.0f} / {p99:.0f}"


def fleet_for(configuration: str, placement_url: str | None) -> FleetConfig:
    """The local stack's fleet; for `fgd`, with `volcano.placement: fgd` calling the service
    (the configuration a user writes)."""
    raw = load_stack_config(stack_file("local")).model_dump(mode="json", exclude_none=True)
    if configuration == "fgd":
        raw["volcano"] = {**raw.get("volcano", {}), "placement": "fgd"}
        raw["volcano"]["placement_url"] = placement_url
    return parse_fleet(raw)


def restart_scheduler(volcano: LocalVolcano, fleet: FleetConfig) -> None:
    """vc-scheduler again with this fleet's configuration (and fresh metrics)."""
    volcano.kill("vc-scheduler")
    volcano.fleet = fleet
    volcano.write_configuration()
    volcano.start_component("vc-scheduler")
    # Its health check answers before its metrics listener does.
    url = f"http://127.0.0.1:{volcano.ports['scheduler']}/metrics"
    deadline = time.monotonic() + 60
    while True:
        try:
            scrape(url)
            return
        except ServerError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def wait_for_namespace(client: KubeClient, namespace: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            client.get(namespace_path(namespace) + "/serviceaccounts/default")
            return
        except NotFoundError:
            time.sleep(0.2)
    raise TimeoutError(f"no default ServiceAccount in {namespace} within {timeout:.0f} s")


def measure(
    configuration: str,
    client: ScrapingClient,
    volcano: LocalVolcano,
    pods: Sequence[PodRequest],
    *,
    run: str,
    idle_seconds: float,
    per_pod_timeout: float,
    service_url: str | None,
) -> Result:
    metrics_url = f"http://127.0.0.1:{volcano.ports['scheduler']}/metrics"
    namespace = f"{run}-{configuration}"
    client.create(
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
    )
    client.create("/apis/scheduling.volcano.sh/v1beta1/queues", realcheck.queue_manifest(namespace))
    wait_for_namespace(client, namespace)
    result = Result(configuration=configuration, pods=len(pods))
    before = scrape(metrics_url)
    time.sleep(idle_seconds)
    idle = delta(scrape(metrics_url), before)
    result.idle_sessions = int(value(idle, E2E + "_count"))
    result.idle_ms = value(idle, E2E + "_sum") / max(result.idle_sessions, 1)
    log(
        f"{configuration}: {result.idle_sessions} idle sessions, "
        f"{result.idle_ms:.0f} ms each on average; submitting {len(pods)} pods"
    )
    scrapes: list[Series] = []
    client.before_pod = lambda: scrapes.append(scrape(metrics_url))
    pid = volcano.processes["vc-scheduler"].pid
    cpu = cpu_seconds(pid)
    began = time.monotonic()
    try:
        real = realcheck.run_on_volcano(
            client,
            pods,
            namespace=namespace,
            queue=namespace,
            run=run,
            per_pod_timeout=per_pod_timeout,
            log=lambda message: log(f"{configuration}: {message}"),
        )
        scrapes.append(scrape(metrics_url))
        result.seconds = time.monotonic() - began
        result.scheduler_cpu = cpu_seconds(pid) - cpu
        if service_url is not None:
            result.service = scrape(service_url + METRICS_PATH)
    finally:
        client.before_pod = lambda: None
    if real.timed_out:
        log(f"{configuration}: {len(real.timed_out)} pods neither bound nor refused in time")
    lone: dict[str, list[float]] = {
        "session": [],
        "open": [],
        "allocate": [],
        "scoring": [],
        "close": [],
    }
    for pod, (first, last) in zip(pods, itertools.pairwise(scrapes), strict=True):
        if real.placement.get(pod.name) is None:
            continue
        result.placed += 1
        window = delta(last, first)
        if value(window, E2E + "_count") != 1:
            continue
        session, opening = value(window, E2E + "_sum"), value(window, OPEN + "_sum")
        actions = sum(v for k, v in window.items() if k.startswith(ACTION + "_sum{"))
        lone["session"].append(session)
        lone["open"].append(opening)
        # What is left of the session: closing it (job and PodGroup status written back to
        # the API server), between the actions.
        lone["close"].append(session - opening - actions)
        lone["allocate"].append(value(window, ACTION + "_sum", action="allocate"))
        lone["scoring"].append(value(window, STAGE + "_sum", stage="Scoring"))
    result.lone = lone
    return result


def clear(client: KubeClient, namespace: str, attempts: int = 5) -> None:
    """Delete a configuration's pods (waiting until they are gone: the next configuration
    would find their nodes full), namespace and queue. Deleting hundreds of pods on a loaded
    machine can outlast the client's timeout; the API server goes on, so it is asked again."""
    log(f"deleting the pods of {namespace}")
    for attempt in range(attempts):
        try:
            realcheck.clean_up(client, namespace=namespace, nodes=[], queue=namespace)
            return
        except (TemporaryError, TimeoutError) as error:
            if attempt == attempts - 1:
                raise
            log(f"{error}; again")


def service_row(series: Series) -> str:
    calls = value(series, SERVICE_SECONDS + "_count", verb="prioritize")
    if not calls:
        return "the service answered no prioritize call"
    quantiles = [
        histogram_quantile(series, SERVICE_SECONDS, q, verb="prioritize") for q in (0.5, 0.9, 0.99)
    ]
    shown = " / ".join("n/a" if v is None else f"{1000 * v:.0f}" for v in quantiles)
    mean = 1000 * value(series, SERVICE_SECONDS + "_sum", verb="prioritize") / calls
    nodes = value(series, SERVICE_NODES) / calls
    return (
        f"placement service: {calls:.0f} prioritize calls, {nodes:.0f} candidate nodes per call, "
        f"ms per call p50 / p90 / p99 {shown} (bucket-interpolated), mean {mean:.1f}"
    )


def table(results: Sequence[Result]) -> str:
    lines = [
        "| configuration | pods placed | lone sessions | session ms (p50 / p90 / p99) "
        "| open ms | allocate ms | scoring ms | close ms | idle session ms (mean) "
        "| scheduler CPU ms per pod |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.configuration} | {r.placed}/{r.pods} | {len(r.lone['session'])} "
            f"| {percentiles(r.lone['session'])} | {percentiles(r.lone['open'])} "
            f"| {percentiles(r.lone['allocate'])} | {percentiles(r.lone['scoring'])} "
            f"| {percentiles(r.lone['close'])} "
            f"| {r.idle_ms:.0f} | {1000 * r.scheduler_cpu / max(r.pods, 1):.0f} |"
        )
    return "\n".join(lines)


def choose_nodes(nodes: list[TraceNode], count: int, seed: int) -> list[TraceNode]:
    if count >= len(nodes):
        return nodes
    rng = np.random.default_rng(seed)
    return sorted(
        (nodes[i] for i in rng.choice(len(nodes), count, replace=False)), key=lambda n: n.name
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    trace = Path(DEFAULT_TRACE_DIR)
    parser.add_argument("--nodes", type=int, default=0, help="GPU nodes (default: all)")
    parser.add_argument("--pods", type=int, default=200, help="trace pods submitted")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pod-list", type=Path, default=trace / "openb_pod_list_default.csv")
    parser.add_argument("--node-list", type=Path, default=trace / DEFAULT_NODE_FILE)
    parser.add_argument(
        "--period", default=SCHEDULE_PERIOD, help=f"session period (shipped: {SCHEDULE_PERIOD})"
    )
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--per-pod-timeout", type=float, default=30.0)
    parser.add_argument(
        "--configuration", action="append", choices=CONFIGURATIONS, help="default: both"
    )
    parser.add_argument("--work-dir", type=Path, help="default: a temporary directory")
    args = parser.parse_args(argv)
    for path in (args.pod_list, args.node_list):
        if not path.exists():
            print(f"error: {path} not found (the trace's lists)", file=sys.stderr)
            return 2
    every = read_nodes(args.node_list)
    nodes = choose_nodes(every, args.nodes or len(every), args.seed)
    try:
        pods = realcheck.sample(
            read_pod_requests(args.pod_list), nodes, count=args.pods, seed=args.seed
        ).pods
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="fleetplane-session-bench-"))
    log(
        f"{len(nodes):,} nodes ({sum(n.gpus for n in nodes):,} GPUs), {len(pods)} pods; "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; work directory {work}"
    )
    try:
        results = run(args, nodes, pods, work)
    except (ClusterError, ServerError, TemporaryError, TimeoutError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print()
    print(
        f"{len(nodes):,} nodes, {len(pods)} pods, session period {args.period}; "
        f"load {os.getloadavg()[0]:.1f} (1 min) at the end"
    )
    print(table(results))
    for r in results:
        if r.service is not None:
            print(service_row(r.service))
    return 0


def run(
    args: argparse.Namespace, nodes: list[TraceNode], pods: list[PodRequest], work: Path
) -> list[Result]:
    configurations = args.configuration or list(CONFIGURATIONS)
    run_label = f"ss-{os.getpid()}"
    log("starting the control plane")
    with LocalCluster(data_dir=work / "cluster") as cluster:
        volcano = MeteredVolcano(
            cluster=cluster, fleet=fleet_for("shipped", None), log=log, schedule_period=args.period
        )
        volcano.start()
        client = ScrapingClient.from_kubeconfig(str(cluster.kubeconfig))
        assert isinstance(client, ScrapingClient)
        try:
            log(f"creating {len(nodes):,} KWOK nodes")
            realcheck.create_nodes(client, nodes, run_label, timeout=120 + len(nodes) / 5)
            log(f"nodes Ready; load {os.getloadavg()[0]:.1f}")
            results = []
            for configuration in configurations:
                service: PlacementServer | None = None
                if configuration == "fgd":
                    service = PlacementServer(work_dir=work / "placement", recent_pods=0).start()
                try:
                    restart_scheduler(
                        volcano, fleet_for(configuration, service.url if service else None)
                    )
                    results.append(
                        measure(
                            configuration,
                            client,
                            volcano,
                            pods,
                            run=run_label,
                            idle_seconds=args.idle_seconds,
                            per_pod_timeout=args.per_pod_timeout,
                            service_url=service.url if service else None,
                        )
                    )
                finally:
                    if service is not None:
                        service.stop()
                # Printed at once: a later configuration's failure keeps this one's figures.
                print(table(results[-1:]), flush=True)
                log(f"{configuration}: done; load {os.getloadavg()[0]:.1f}")
                if configuration != configurations[-1]:
                    clear(client, f"{run_label}-{configuration}")
        finally:
            client.close()
            volcano.stop()
    return results


if __name__ == "__main__":
    sys.exit(main())
