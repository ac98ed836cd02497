"""One reconcile pass: lease → observe → decide → act → summary.

`run_pass` is the library entry point (the command line and the tests call it). Concerns run in
the order idle, lifetime, spend, admission (the documents the gate reads: workload records,
reservations, approval bindings), preempt, each on the same snapshot; an error in one concern is logged
(`<concern>.failed`) and counted under that concern, and the next concern still runs, while a
failure to observe stops the pass (no evidence, no action), and so does a lost Lease.
Preemption treats the pods idle reclamation and the lifetime concern removed in this pass as
already freed; the lifetime concern leaves alone what idle reclamation already removed.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TextIO, TypeVar

from controller import annotations as own
from controller.act.admission_data import act_on_bindings, act_on_records, act_on_reservations
from controller.act.idle import act_on_idle
from controller.act.maxruntime import act_on_runtime
from controller.act.opa import Opa
from controller.act.opa_files import kept_bindings
from controller.act.orphans import act_on_orphans
from controller.act.preempt import act_on_preemption
from controller.act.runtime import Runtime
from controller.act.spend import act_on_spend
from controller.act.stragglers import act_on_stragglers
from controller.config import FleetView, Settings, period_seconds
from controller.decide.approvals import approval_users, plan_bindings
from controller.decide.idle import EvidenceRules, plan_idle
from controller.decide.lineage import by_uid
from controller.decide.maxruntime import plan_runtime
from controller.decide.orphans import plan_orphans
from controller.decide.preempt import plan_preemption
from controller.decide.records import workload_records
from controller.decide.reservations import plan_reservations
from controller.decide.spend import Accumulator, plan_spend
from controller.decide.stragglers import (
    Utilisation,
    expected_samples,
    needs_evidence,
    plan_stragglers,
)
from controller.decide.usage import team_usage
from controller.decide.workloads import gang_of
from controller.errors import (
    ControllerError,
    InjectedFault,
    LeaseHeldError,
    PermanentError,
    error_kind,
)
from controller.lease import Lease, held
from controller.log import Log
from controller.observe.kube import KubeClient
from controller.observe.metrics import PodEvidence, Prometheus
from controller.observe.model import Pod
from controller.observe.owners import read_owners
from controller.observe.snapshot import Snapshot, take_snapshot
from controller.remediation.signals import pod_utilisation
from controller.summary import Summary

CONCERNS = ("idle", "lifetime", "spend", "admission", "preempt")

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
    concerns: tuple[str, ...] = CONCERNS,
    now: float | None = None,
    hooks: Hooks | None = None,
    out: TextIO | None = None,
    log: Log | None = None,
) -> Summary:
    log = log or Log()
    out = out or sys.stdout
    hooks = hooks or Hooks()
    summary = Summary(dry_run=settings.dry_run)
    opa = Opa(
        settings.opa_url,
        ca_file=settings.opa_ca_file,
        token_file=settings.opa_token_file,
        timeout=settings.request_timeout_seconds,
    )
    prometheus = Prometheus(
        settings.prometheus_url,
        timeout=max(settings.query_timeout_seconds, settings.request_timeout_seconds),
    )
    requests_before = kube.requests_made
    lease = (
        None
        if settings.dry_run
        else Lease(
            kube,
            namespace=settings.lease_namespace,
            name=settings.lease_name,
            seconds=settings.lease_seconds,
            log=log,
        )
    )
    log.info("pass.start", concerns=list(concerns), dry_run=settings.dry_run)
    for concern in ("observe", *concerns):
        summary.declare_errors(concern)
    collector = _GcClock()
    try:
        with held(lease), collector:
            _run(
                kube,
                fleet,
                settings,
                concerns,
                now,
                hooks,
                out,
                log,
                summary,
                opa,
                prometheus,
                lease,
            )
    except LeaseHeldError as error:
        summary.skipped = str(error)
        log.info("pass.skipped", reason=str(error))
    except InjectedFault:
        raise
    except ControllerError as error:
        kind = error_kind(error)
        summary.error("observe", kind)
        log.error("pass.failed", error=str(error), kind=kind)
    finally:
        opa.close()
        prometheus.close()
    summary.set("gc_seconds", round(collector.seconds, 3))
    summary.finish(kube.requests_made - requests_before)
    summary.set("service_requests", prometheus.requests_made, service="prometheus")
    summary.set("service_requests", opa.requests_made, service="opa")
    log.info("pass.summary", **summary.as_dict())
    return summary


def _run(
    kube: KubeClient,
    fleet: FleetView,
    settings: Settings,
    concerns: tuple[str, ...],
    now: float | None,
    hooks: Hooks,
    out: TextIO,
    log: Log,
    summary: Summary,
    opa: Opa,
    prometheus: Prometheus,
    lease: Lease | None,
) -> None:
    phase = time.monotonic()

    def lap(name: str) -> None:
        nonlocal phase
        summary.set("phase_seconds", round(time.monotonic() - phase, 3), phase=name)
        phase = time.monotonic()

    clock = time.time() if now is None else now
    # DCGM evidence does not depend on the snapshot: fetch it while the snapshot is taken.
    with _collector_paused(), ThreadPoolExecutor(max_workers=1) as background:
        evidence = (
            background.submit(_evidence, fleet, prometheus, clock) if "idle" in concerns else None
        )
        snapshot = take_snapshot(kube, log=log)
        found = evidence.result() if evidence is not None else None
    lap("observe")
    summary.set("observed", len(snapshot.nodes), kind="nodes")
    summary.set("observed", len(snapshot.pods), kind="accelerator_pods")
    summary.set("observed", len(snapshot.volcano), kind="volcano_objects")
    if hooks.after_observe:
        hooks.after_observe(snapshot)
    rt = Runtime(
        kube=kube,
        opa=opa,
        fleet=fleet,
        settings=settings,
        now=clock,
        summary=summary,
        log=log,
        out=out,
        after_action=hooks.after_action,
        namespaces=snapshot.namespaces,
        nodes=snapshot.nodes,
    )
    _usage(rt, snapshot)
    freed: set[str] = set()
    if "idle" in concerns:
        assert found is not None
        freed = _isolated(rt, "idle", lambda: _idle(rt, snapshot, found)) or set()
        if lease:
            lease.renew()
        lap("idle")
    if "lifetime" in concerns:
        ended = _isolated(
            rt, "lifetime", lambda: _lifetime(rt, snapshot, frozenset(freed), prometheus)
        )
        freed |= ended or set()
        if lease:
            lease.renew()
        lap("lifetime")
    if "spend" in concerns:
        _isolated(rt, "spend", lambda: _spend(rt, snapshot))
        if lease:
            lease.renew()
        lap("spend")
    if "admission" in concerns:
        _isolated(rt, "admission", lambda: _admission(rt, snapshot))
        if lease:
            lease.renew()
        lap("admission")
    if "preempt" in concerns:
        _isolated(rt, "preempt", lambda: _preempt(rt, snapshot, freed))
        lap("preempt")


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
        kind = error_kind(error)
        rt.summary.error(concern, kind)
        rt.log.error(f"{concern}.failed", error=str(error), kind=kind)
        return None


Evidence = dict[int, dict[tuple[str, str], PodEvidence]]


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


def _evidence(fleet: FleetView, prometheus: Prometheus, now: float) -> Evidence | ControllerError:
    # Per window, the highest idle threshold of the types using it: pods with a GPU above it
    # are busy on their peak utilisation alone (observe.metrics reads no more for them).
    windows: dict[int, float] = {}
    for wt in fleet.workload_types.values():
        if wt.idle:
            window = wt.idle.window_seconds
            line = wt.idle.util_threshold_percent
            windows[window] = max(windows.get(window, line), line)
    try:
        return prometheus.evidence_for_windows(windows, now)
    except ControllerError as error:
        return error


def _idle(rt: Runtime, snapshot: Snapshot, found: Evidence | ControllerError) -> set[str]:
    if isinstance(found, ControllerError):
        kind = error_kind(found)
        rt.summary.error("idle", kind)
        rt.log.error(
            "idle.metrics-unavailable",
            error=str(found),
            kind=kind,
            consequence="no evidence: nothing is warned or reclaimed in this pass",
        )
        return set()
    evidence = found
    rules = EvidenceRules(
        scrape_interval_seconds=rt.settings.scrape_interval_seconds,
        min_sample_coverage=rt.settings.min_sample_coverage,
        fb_steady_mib=rt.settings.fb_steady_mib,
    )
    plan = plan_idle(snapshot.pods, rt.fleet, evidence, rt.now, rules)
    return act_on_idle(rt, plan)


def _lifetime(
    rt: Runtime, snapshot: Snapshot, freed: frozenset[str], prometheus: Prometheus
) -> set[str]:
    """Orphaned and failed work, then work past its maximum runtime, then gang stragglers, on the
    snapshot's pods and their owners (read now, after the pods); pods idle reclamation already
    removed in this pass are left out, and so is what an earlier step of the concern ended (a
    gang with a member ended is not judged for stragglers: its peers are no longer all there)."""
    pods = [pod for pod in snapshot.pods if pod.uid not in freed]
    owners = read_owners(rt.kube, pods, log=rt.log, workers=max(1, rt.settings.act_concurrency))
    rules = rt.fleet.lifetime
    ended = act_on_orphans(rt, plan_orphans(pods, owners, rt.now, rules))
    pods = [pod for pod in pods if pod.uid not in ended]
    ended |= act_on_runtime(rt, plan_runtime(pods, rt.fleet, owners, rt.now, rules))
    gone = {gang_of(pod) for pod in snapshot.pods if pod.uid in ended or pod.uid in freed}
    pods = [
        pod
        for pod in pods
        if pod.uid not in ended and (gang_of(pod) is None or gang_of(pod) not in gone)
    ]
    return ended | _stragglers(rt, pods, prometheus)


def _stragglers(rt: Runtime, pods: list[Pod], prometheus: Prometheus) -> set[str]:
    """Read the gangs' utilisation (only when a gang has two running members) and judge them;
    without evidence every member is unknown: nothing is reported or restarted."""
    rules = rt.fleet.lifetime
    evidence: dict[tuple[str, str], Utilisation] = {}
    if needs_evidence(pods):
        try:
            found = pod_utilisation(prometheus, rt.now, rules.straggler_window_seconds)
        except ControllerError as error:
            kind = error_kind(error)
            rt.summary.error("lifetime", kind)
            rt.log.error(
                "lifetime.straggler.metrics-unavailable",
                error=str(error),
                kind=kind,
                consequence="no evidence: no straggler is reported or restarted in this pass",
            )
        else:
            evidence = {
                key: Utilisation(peak_percent=peak, mean_percent=mean, samples=samples)
                for key, (peak, mean, samples) in found.items()
            }
    expected = expected_samples(
        rules.straggler_window_seconds,
        rt.settings.scrape_interval_seconds,
        rt.settings.min_sample_coverage,
    )
    return act_on_stragglers(rt, plan_stragglers(pods, evidence, rt.now, rules, expected))


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


def _spend(rt: Runtime, snapshot: Snapshot) -> None:
    accumulators: dict[str, Accumulator | None] = {}
    for name, team in rt.fleet.teams.items():
        home = next((ns for ns in team.namespaces if ns in snapshot.namespaces), None)
        accumulators[name] = (
            Accumulator.decode(snapshot.namespaces[home].annotations.get(own.SPEND))
            if home
            else None
        )
    plan = plan_spend(
        snapshot.pods, snapshot.nodes, snapshot.namespaces, rt.fleet, accumulators, rt.now
    )
    act_on_spend(rt, plan)


def _admission(rt: Runtime, snapshot: Snapshot) -> None:
    """The documents the gate reads and only the controller writes: the per-workload records
    a scale subresource is judged by, the reservations of admitted workloads, and the
    approvals' bindings (decide/records.py, reservations.py, approvals.py). Each is its own
    action: a failure of one leaves the others written."""
    objects = by_uid(snapshot.workload_objects)
    act_on_records(rt, workload_records(snapshot.workload_objects, rt.fleet.system_namespaces))
    period = period_seconds(rt.fleet, rt.settings)
    reservations = plan_reservations(
        snapshot.pods, snapshot.nodes, objects, rt.fleet, rt.now, horizon_seconds=2 * period
    )
    act_on_reservations(rt, reservations)
    # Approvals are granted in OPA (rendered, or by an approver): read them there, with the
    # bindings kept for OPA's start (they win over a replica that shows one unbound).
    approvals = rt.opa.get_data("fleetplane/approvals") or {}
    if not isinstance(approvals, dict):
        raise PermanentError(f"data.fleetplane.approvals is not an object: {approvals!r:.200}")
    kept = kept_bindings(rt.kube, rt.settings.opa_data_configmap)
    users = approval_users(snapshot.pods, objects, rt.fleet)
    act_on_bindings(rt, plan_bindings(approvals, kept, users, rt.now))


def _preempt(rt: Runtime, snapshot: Snapshot, freed: set[str]) -> None:
    plan = plan_preemption(
        snapshot.pods,
        snapshot.nodes,
        snapshot.pdbs,
        rt.fleet,
        snapshot.priority_of,
        rt.now,
        pending_seconds=rt.settings.preemption_pending_seconds,
        freeing=frozenset(freed),
        min_members=snapshot.min_members(),
    )
    act_on_preemption(rt, plan, snapshot.pods, frozenset(freed))
