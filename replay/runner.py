"""Run scenarios side by side: one process per scenario (each with its own OPA, since each has
its own configuration and spend documents), and gather their figures in one document."""

from __future__ import annotations

import gc
import math
import multiprocessing
import os
import platform
import resource
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import replay.controller_pass  # noqa: F401  (imported once, before workers fork)
from localfleet.servers import OpaServer
from replay.cpu_pods import ReservePerIdleGpu
from replay.engine import Replay, Settings
from replay.node_pools import node_shapes, pool_gpus
from replay.opa import BatchClient
from replay.results import scenario_figures
from replay.scenarios import DEFAULT_SCENARIOS, Scenario, ScenarioSet, load_scenarios
from replay.trace import (
    DEFAULT_NODE_FILE,
    DEFAULT_POD_FILE,
    DEFAULT_TRACE_DIR,
    Trace,
    TracePod,
    load_trace,
)
from replay.workloads import (
    CALIBRATION_TARGETS,
    CITATIONS,
    Assumptions,
    Workload,
    calibration,
    describe,
    generate,
)

Progress = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class Options:
    """Everything a replay run needs; picklable, so worker processes rebuild their inputs."""

    trace_dir: Path = DEFAULT_TRACE_DIR
    pod_file: str = DEFAULT_POD_FILE
    node_file: str = DEFAULT_NODE_FILE
    scenarios: Path = DEFAULT_SCENARIOS
    only: tuple[str, ...] = ()
    settings: Settings = field(default_factory=Settings)
    assumptions: Assumptions = field(default_factory=Assumptions)
    window: str = "auto"
    """auto: from the day by which 1 % of the GPU pods had arrived to the end; all: the whole
    trace; START:END in days."""
    opa_url: str | None = None
    """An OPA already running with the project's policies; scenarios then run one after
    another in this process. None starts one OPA per scenario."""
    jobs: int = 0
    """Worker processes; 0 for one per scenario. A scenario's Python and its OPA take turns,
    and each hand-over leaves a CPU idle for a moment, so more workers than CPUs keep the CPUs
    busy: on two cores, all five default scenarios, five workers took 92 s and 171.5 CPU-s and
    two workers (the heaviest first) 94 s and 171 CPU-s, back to back."""


def trace_variables(trace: Trace) -> dict[str, int]:
    """`peak_gpus`: the most GPUs the pods held at once; `fleet_gpus`: what the pools built
    from the node list for that peak can hold (the peak without a node list)."""
    peak = trace.peak_gpus()
    shapes = node_shapes(trace.nodes)
    return {"peak_gpus": peak, "fleet_gpus": pool_gpus(shapes, peak_gpus=peak) if shapes else peak}


def measurement_window(trace: Trace, spec: str) -> tuple[float, float]:
    if spec == "all":
        return 0.0, float(trace.end)
    if spec == "auto":
        first_day = math.floor(trace.arrival_quantile(0.01) / 86400)
        return float(first_day * 86400), float(trace.end)
    try:
        first, last = spec.split(":", 1)
        start = float(first) * 86400 if first else 0.0
        end = float(last) * 86400 if last else float(trace.end)
    except ValueError:
        raise ValueError(f"window {spec!r}: auto, all, or START:END in days") from None
    if not 0 <= start < end:
        raise ValueError(f"window {spec!r}: START must be below END")
    return start, min(end, float(trace.end))


def run_scenario(
    scenario: Scenario,
    workloads: list[Workload],
    policy: BatchClient,
    settings: Settings,
    progress: Progress | None = None,
    *,
    cpu_pods: Sequence[TracePod] = (),
    reserve: ReservePerIdleGpu | None = None,
) -> Replay:
    """One scenario against an OPA that holds the project's policies: the batch module and
    the scenario's configuration are written to it first. `cpu_pods`: the trace's pods
    without GPUs, replayed beside the GPU pods (`replay.cpu_pods`); `reserve`: the CPU they
    leave per idle GPU of a pool's nodes (default: the scenario's Volcano configuration's)."""
    policy.install()
    policy.put_config(scenario.document)
    policy.put_data("fleetplane/spend", {})
    return Replay(scenario, workloads, policy, settings, progress=progress, cpu_pods=cpu_pods).run()


GC_THRESHOLDS = (100_000, 50, 1_000)
"""Python's collector thresholds in a scenario's worker (generation 0 collected after 100,000
allocations instead of 700): the replay makes many short-lived objects and few cycles."""

OPA_GOGC = "200"
"""Go's GC target for the OPA servers the replay starts (unless GOGC is set). Alone, one OPA
spends about the same CPU per query at any GOGC from 200 to 1600 (the earlier 1600 saved a
sixth against 400 in such runs); five side by side on two cores (the default run) did better
with a heap small enough to stay in the caches in the two back-to-back pairs of
`bench/replay_default_trace.py` (165 against 182 and 114 against 120 CPU-seconds, GOGC=200
against 1600), though later runs at this machine's drifting speed did not tell them apart.
A server's heap stays a few times its live data instead of growing to about 250 MB."""
OPA_GOMEMLIMIT = "1GiB"
"""A soft limit per OPA server (unless GOMEMLIMIT is set), above which Go collects sooner
whatever GOGC says."""
OPA_GOMAXPROCS = "1"
"""Go threads running at once in each OPA the replay starts (unless GOMAXPROCS is set): each
OPA answers one query at a time, several scenarios run side by side on few cores, and one
thread spares the Go scheduler's spinning and parallel GC (a third less CPU per query)."""


@dataclass(frozen=True, kw_only=True)
class _Inputs:
    """What every scenario of a run shares: built once in the parent, inherited by forked
    workers (rebuilt by workers that were not forked)."""

    options: Options
    trace: Trace
    variables: dict[str, int]
    scenarios: ScenarioSet
    workloads: list[Workload]
    settings: Settings


_inherited: _Inputs | None = None


def _inputs(options: Options) -> _Inputs:
    trace = load_trace(options.trace_dir, pod_file=options.pod_file, node_file=options.node_file)
    variables = trace_variables(trace)
    scenarios = load_scenarios(
        options.scenarios,
        variables=variables,
        only=options.only,
        shapes=node_shapes(trace.nodes),
    )
    return _Inputs(
        options=options,
        trace=trace,
        variables=variables,
        scenarios=scenarios,
        workloads=generate(trace.pods, scenarios.assignment, options.assumptions),
        settings=replace(options.settings, window=measurement_window(trace, options.window)),
    )


def _worker(options: Options, name: str) -> dict[str, Any]:
    """One scenario with its own OPA; its figures, with the CPU-seconds it used (this process
    and its OPA server)."""
    os.environ.setdefault("GOGC", OPA_GOGC)  # inherited by the OPA server started below
    os.environ.setdefault("GOMEMLIMIT", OPA_GOMEMLIMIT)
    os.environ.setdefault("GOMAXPROCS", OPA_GOMAXPROCS)
    own_before = _cpu(resource.RUSAGE_SELF)
    children_before = _cpu(resource.RUSAGE_CHILDREN)
    inputs = _inherited if _inherited is not None and _inherited.options == options else None
    if inputs is None:
        inputs = _inputs(options)
    # The trace and the workloads live as long as the worker and hold no cycles worth
    # collecting: kept out of the collector's scans, and collected less often, the replay's
    # own garbage costs Python's GC about a third of what it did (0.9 -> 0.3 s of `reclaim`).
    # (Restored afterwards: a worker may be the caller's own process.)
    thresholds = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    scenario = next(s for s in inputs.scenarios.scenarios if s.name == name)
    server = OpaServer().start()
    client = BatchClient(server.url)
    try:
        replay = run_scenario(
            scenario, inputs.workloads, client, inputs.settings, cpu_pods=inputs.trace.cpu_pods
        )
    finally:
        client.close()
        server.stop()  # waits for it: its CPU time is now among this process's children's
        gc.set_threshold(*thresholds)
        gc.unfreeze()
    figures = scenario_figures(replay)
    replay_cpu = _cpu(resource.RUSAGE_SELF) - own_before
    opa_cpu = _cpu(resource.RUSAGE_CHILDREN) - children_before
    figures["throughput"]["cpu_seconds"] = {
        "replay": round(replay_cpu, 2),
        "opa": round(opa_cpu, 2),
        "total": round(replay_cpu + opa_cpu, 2),
    }
    return figures


def run(options: Options, progress: Progress | None = None) -> dict[str, Any]:
    """Every scenario of the options; the document `report` and the JSON file are made of."""
    say = progress or (lambda _: None)
    began = time.perf_counter()
    cpu_before = _cpu_seconds()
    inputs = _inputs(options)
    trace, variables, workloads, settings = (
        inputs.trace,
        inputs.variables,
        inputs.workloads,
        inputs.settings,
    )
    scenario_set = inputs.scenarios
    window = settings.window
    assert window is not None
    names = [s.name for s in scenario_set.scenarios]
    figures: dict[str, dict[str, Any]] = {}
    say(
        f"replaying {len(trace.pods)} GPU pods and {len(trace.cpu_pods)} CPU-only pods over {trace.end / 86400:.1f} days through "
        f"{len(names)} scenario(s): {', '.join(names)}"
    )
    if options.opa_url is not None:
        client = BatchClient(options.opa_url)
        try:
            for scenario in scenario_set.scenarios:
                replay = run_scenario(
                    scenario, workloads, client, settings, progress, cpu_pods=trace.cpu_pods
                )
                figures[scenario.name] = scenario_figures(replay)
                say(_done(figures[scenario.name]))
        finally:
            client.close()
    else:
        global _inherited
        _inherited = inputs  # workers in this process or forked from it use these inputs
        jobs = workers = options.jobs or len(names)
        try:
            if jobs <= 1:
                for name in names:
                    figures[name] = _worker(options, name)
                    say(_done(figures[name]))
            else:
                with ProcessPoolExecutor(max_workers=jobs, mp_context=_fork_context()) as pool:
                    futures = {
                        pool.submit(_worker, options, name): name
                        for name in heaviest_first(scenario_set.scenarios)
                    }
                    for future in as_completed(futures):
                        result = future.result()
                        figures[futures[future]] = result
                        say(_done(result))
        finally:
            _inherited = None
    wall = time.perf_counter() - began
    cpu = _cpu_seconds() - cpu_before
    ordered = [figures[name] for name in names]
    events = sum(f["throughput"]["events"] for f in ordered)
    periods = sum(f["throughput"]["periods"] for f in ordered)
    return {
        "trace": _trace_facts(trace, variables, window),
        "scenarios_file": scenario_set.source,
        "settings": _settings(settings),
        "assumptions": describe(options.assumptions),
        "assignment": scenario_set.assignment,
        "calibration": {
            "targets": CALIBRATION_TARGETS,
            "achieved": calibration(workloads),
            "citations": list(CITATIONS),
        },
        "scenarios": ordered,
        "throughput": {
            "wall_seconds": round(wall, 2),
            "events": events,
            "periods": periods,
            "events_per_second": round(events / wall, 1),
            "periods_per_second": round(periods / wall, 1),
            "workers": 1 if options.opa_url else workers,
            "cpu_seconds": round(cpu, 1),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
    }


def heaviest_first(scenarios: list[Scenario]) -> list[str]:
    """Scenario names in the order workers should take them: the longest first, so the short
    ones fill in at the end (a makespan near the total divided by the workers). Idle
    reclamation is what makes a scenario long: reclaimed pods come back and are reviewed again,
    and every period asks reclaim decisions (on the default trace `reclaim` and `governed` take
    about 35 CPU-seconds each, the others about 15)."""
    return [
        s.name
        for s in sorted(
            scenarios, key=lambda s: ("idle" in s.concerns, len(s.concerns)), reverse=True
        )
    ]


def _fork_context() -> Any:
    """Forked workers inherit the parent's trace and workloads (and its imports); where
    there is no fork, workers rebuild them."""
    try:
        return multiprocessing.get_context("fork")
    except ValueError:
        return multiprocessing.get_context()


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _cpu_seconds() -> float:
    """CPU time of this process and of the processes it has waited for (the workers and the
    OPA servers they started), user and system."""
    return _cpu(resource.RUSAGE_SELF) + _cpu(resource.RUSAGE_CHILDREN)


def _done(figures: dict[str, Any]) -> str:
    t = figures["throughput"]
    cpu = t.get("cpu_seconds")
    used = (
        f", {cpu['total']:.1f} CPU-s (replay {cpu['replay']:.1f}, OPA {cpu['opa']:.1f})"
        if isinstance(cpu, dict)
        else ""
    )
    return (
        f"  {figures['name']}: {t['wall_seconds']:.1f} s, {t['events_per_second']:.0f} events/s, "
        f"{t['periods_per_second']:.0f} periods/s, {t['opa']['queries']} OPA queries{used}"
    )


def _trace_facts(
    trace: Trace, variables: dict[str, int], window: tuple[float, float]
) -> dict[str, Any]:
    shared = sum(1 for p in trace.pods if p.shared)
    return {
        "source": trace.source,
        "gpu_pods": len(trace.pods),
        "cpu_only_pods": len(trace.cpu_pods),
        "skipped": trace.skipped,
        "sharing_pods": shared,
        "days": round(trace.end / 86400, 2),
        "nodes": len(trace.nodes),
        "node_gpus": trace.node_gpus,
        "gpus_per_node": trace.gpus_per_node(),
        "peak_gpus": variables["peak_gpus"],
        "window_days": [round(window[0] / 86400, 2), round(window[1] / 86400, 2)],
        "pods_in_window": sum(1 for p in trace.pods if window[0] <= p.created <= window[1]),
        "never_scheduled": sum(1 for p in trace.pods if p.scheduled is None),
    }


def _settings(settings: Settings) -> dict[str, Any]:
    out = asdict(settings)
    out["interruptions"] = [list(i) for i in settings.interruptions]
    out["window"] = list(settings.window) if settings.window else None
    return out
