"""One reconcile pass: lease → observe → decide → act → summary.

`run_pass` is the library entry point (the command line and the tests call it). The concerns
are the registry's (controller/concerns): idle, lifetime, spend, admission (the documents the
gate reads: workload records, reservations, approval bindings), preempt, in that order, each on
the same snapshot; an error in one concern is logged (`<concern>.failed`) and counted under that
concern, and the next concern still runs, while a failure to observe stops the pass (no
evidence, no action), and so does a lost Lease. Preemption treats the pods idle reclamation and
the lifetime concern removed in this pass as already freed; the lifetime concern leaves alone
what idle reclamation already removed (each step is given the pods removed before it).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TextIO, TypeVar

from controller import concerns as registry
from controller.act.runtime import Runtime
from controller.concerns import CONCERNS, PassView
from controller.config import FleetView, Settings, period_seconds
from controller.decide.usage import team_usage
from controller.errors import ControllerError, InjectedFault, LeaseHeldError
from controller.harness import PassHarness
from controller.log import Log
from controller.observe.kube import KubeClient
from controller.observe.snapshot import Snapshot, take_snapshot
from controller.observe.watched import WatchedFleet
from controller.summary import Summary

__all__ = ["CONCERNS", "Hooks", "run_pass"]

T = TypeVar("T")


@dataclass(kw_only=True)
class Hooks:
    """Test seams. after_observe: called with the snapshot before any decision (a test can
    change the cluster here to provoke a conflict). after_action: called after every side effect
    with its name (a test can raise `InjectedFault` to simulate a run killed half way)."""

    after_observe: Callable[[Snapshot], None] | None = None
    after_action: Callable[[str], None] | None = None


def run_pass(
    *,
    kube: KubeClient,
    fleet: FleetView,
    settings: Settings,
    concerns: tuple[str, ...] | None = None,
    now: float | None = None,
    hooks: Hooks | None = None,
    out: TextIO | None = None,
    log: Log | None = None,
    watched: WatchedFleet | None = None,
    team_metrics: bool = True,
) -> Summary:
    """One pass. `watched`: the pods and nodes a long-running process keeps by watching
    (the admission keeper), read instead of listed. `team_metrics`: work out the team metrics
    (decide.usage) for the summary; the keeper, whose passes publish no metrics, says False
    (at 100,000 pods they are about 0.6 CPU-s a pass)."""
    harness = PassHarness(
        kube=kube,
        fleet=fleet,
        settings=settings,
        events="pass",
        failure_concern="observe",
        prometheus=True,
        prometheus_timeout=max(settings.query_timeout_seconds, settings.request_timeout_seconds),
        out=out,
        log=log,
    )
    summary = harness.summary
    # None: every concern of the registry (read now, so an entry added to it is part of the pass)
    concerns = tuple(entry.name for entry in registry.REGISTRY) if concerns is None else concerns
    harness.log.info("pass.start", concerns=list(concerns), dry_run=settings.dry_run)
    for concern in ("observe", *concerns):
        summary.declare_errors(concern)
    collector = _GcClock()

    def body() -> None:
        # No cyclic GC for the whole pass: deciding allocates in bursts as observing does
        # (`_collector_paused`; about a fifth of a pass's CPU at 20,000 pods, docs/scale.md).
        with collector, _collector_paused():
            _run(harness, concerns, now, hooks or Hooks(), watched, team_metrics)

    harness.run(body)
    assert harness.prometheus is not None
    summary.set("gc_seconds", round(collector.seconds, 3))
    summary.set("service_requests", harness.prometheus.requests_made, service="prometheus")
    summary.set("service_requests", harness.opa.requests_made, service="opa")
    return harness.finish()


def _run(
    harness: PassHarness,
    concerns: tuple[str, ...],
    now: float | None,
    hooks: Hooks,
    watched: WatchedFleet | None,
    team_metrics: bool,
) -> None:
    summary, prometheus = harness.summary, harness.prometheus
    assert prometheus is not None
    selected = [entry for entry in registry.REGISTRY if entry.name in concerns]
    phase = time.monotonic()

    def lap(name: str) -> None:
        nonlocal phase
        summary.set("phase_seconds", round(time.monotonic() - phase, 3), phase=name)
        phase = time.monotonic()

    clock = time.time() if now is None else now
    # What a concern reads that does not depend on the snapshot (idle's DCGM evidence) is
    # fetched while the snapshot is taken.
    with _collector_paused(), ThreadPoolExecutor(max_workers=1) as background:
        prefetched: dict[str, Future[Any]] = {}
        for entry in selected:
            prefetch = entry.load_prefetch()
            if prefetch is not None:
                prefetched[entry.name] = background.submit(
                    prefetch, harness.fleet, prometheus, clock
                )
        snapshot = take_snapshot(harness.kube, log=harness.log, watched=watched)
        found = {name: future.result() for name, future in prefetched.items()}
    lap("observe")
    summary.set("observed", len(snapshot.nodes), kind="nodes")
    summary.set("observed", len(snapshot.pods), kind="accelerator_pods")
    summary.set("observed", len(snapshot.volcano), kind="volcano_objects")
    if hooks.after_observe:
        hooks.after_observe(snapshot)
    rt = harness.runtime(
        clock,
        after_action=hooks.after_action,
        namespaces=snapshot.namespaces,
        nodes=snapshot.nodes,
    )
    if team_metrics:
        _usage(rt, snapshot)
    freed: set[str] = set()
    for entry in selected:
        view = PassView(
            rt=rt,
            snapshot=snapshot,
            prometheus=prometheus,
            found=found.get(entry.name),
            freed=frozenset(freed),
        )
        removed = _isolated(rt, entry.name, functools.partial(entry.load_step(), view))
        freed |= removed or set()
        # Nothing of the pass follows the last concern: its Lease needs no renewal.
        if harness.lease and entry is not registry.REGISTRY[-1]:
            harness.lease.renew()
        lap(entry.name)


def _isolated(rt: Runtime, concern: str, run: Callable[[], T]) -> T | None:
    """Run one concern; an error of its own is logged and counted under it (None is returned)
    and the next concern still runs. Errors that stop the whole pass go through: a simulated
    kill (`InjectedFault`) and a lost Lease (`LeaseHeldError`: another controller may be acting
    on the same cluster, so nothing more is done)."""
    try:
        return run()
    except (InjectedFault, LeaseHeldError):
        raise
    except ControllerError as error:
        rt.report(concern, f"{concern}.failed", error)
        return None


class _GcClock:
    """Time spent in Python's cyclic garbage collector while active (`gc.callbacks`); on exit,
    objects frozen by `_collector_paused` are handed back to the collector."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._began = 0.0

    def _callback(self, phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._began

    def __enter__(self) -> _GcClock:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *_exc: object) -> None:
        gc.callbacks.remove(self._callback)
        gc.unfreeze()


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic GC while observing, and what observing built is frozen afterwards.

    A snapshot of 50,000 pods is millions of long-lived objects allocated in a burst: each full
    collection the burst triggers scans all of them again, and deciding (which allocates again)
    would keep scanning them, though none is garbage: 1.3-1.6 s of a 5,000-node pass (measured
    with `gc_seconds`). The views hold no reference cycles, so nothing is lost by not collecting
    while they are built; `gc.freeze` moves them out of the collector's way until the pass ends
    (`_GcClock` unfreezes them)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def _usage(rt: Runtime, snapshot: Snapshot) -> None:
    """The team metrics of the pass (decide.usage): quota, budget, what is held, pending and
    burning, and the queue waits of the pods that started since the last pass."""
    summary = rt.summary
    for namespace, name in rt.fleet.namespaces.items():
        summary.set("namespace_team", 1, namespace=namespace, team=name)
    for name, config in rt.fleet.teams.items():
        summary.set("team_budget_usd", config.monthly_budget_usd, team=name)
        for resource, amount in config.quota.items():
            summary.set("team_quota_gpus", amount, team=name, resource=resource)
    period = period_seconds(rt.fleet, rt.settings)
    usage = team_usage(snapshot.pods, snapshot.nodes, rt.fleet, rt.now, period)
    for state, found in (("held", usage.held), ("pending", usage.pending)):
        for (team, resource, model, capacity_type, workload), devices in found.items():
            labels: dict[str, str] = {
                "team": team,
                "resource": resource,
                "workload_type": workload,
            }
            if model:
                labels.update(model=model, capacity_type=capacity_type)
            summary.inc("team_gpus", devices, state=state, **labels)
            summary.declare("queue_wait", team=team, workload_type=workload)
            if state == "held":
                # what a reclaim of this work would count (act.idle's labels), at 0 until then
                reclaim = {**labels, "model": model, "capacity_type": capacity_type}
                for name in ("reclaimed_gpus", "reclaimed_gpu_hours", "reclaim_savings_usd"):
                    summary.declare(name, **reclaim)
    for (team, workload, model, capacity_type), usd in usage.cost_usd_per_hour.items():
        summary.set(
            "team_cost_rate",
            round(usd, 6),
            team=team,
            workload_type=workload,
            model=model,
            capacity_type=capacity_type,
        )
    for (pool, resource, model, capacity_type, state), count in usage.pools.items():
        summary.set(
            "pool_accelerators",
            count,
            pool=pool,
            resource=resource,
            model=model,
            capacity_type=capacity_type,
            state=state,
        )
    for (team, workload, state), count in usage.pods.items():
        summary.set("team_pods", count, team=team, workload_type=workload, state=state)
    for team, workload, seconds in usage.waits:
        summary.observe("queue_wait", seconds, team=team, workload_type=workload)
    for (team, workload), seconds in usage.oldest_pending.items():
        summary.set("queue_oldest", round(seconds, 3), team=team, workload_type=workload)
