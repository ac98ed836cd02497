"""Keep the gate's admission data current between passes (`fleetplane controller admission
--watch`, run by a Deployment).

The reconcile CronJob publishes the reservations of admitted workloads once per period, so every
workload admitted within a period was priced against the same spend, as if the others did not
exist. The keeper runs the admission concern's pass (records, reservations, approval bindings:
controller/concerns/admission.py) and runs it again as soon as a pod is created or deleted: a
workload admitted now counts against its team once its pods exist and one
snapshot later (tests/controller/test_admission_keeper.py measures it), not at the next period.
Workloads submitted together, before either's pods exist, are held apart by the admission front
(controller/admission_front.py), which reserves as part of admitting; the keeper's reservations
then take over from its entries (the gate counts the same workload uid once).

- Pods and nodes are listed once and then kept by their watches (observe/watched.py): a pass
  reads that copy instead of listing 100,000 pods again, and the watch that keeps it is what
  wakes the keeper. The other lists (namespaces, workload objects, claims) are small.
- At most one pass per `interval`: a burst of pods costs one snapshot per interval, however
  many pods it holds.
- At least one pass per `refresh` with no pod created or deleted: a pod placed on a node
  replaces the dearest price by its node's, and expired bounds drop.
- Pod updates do not wake it: they are frequent (every status change), and what they change
  (a node, a phase) only lowers what is reserved; until the refresh that leaves more reserved,
  never less (the gate refuses, it does not let through).
- Its own Lease (`<lease>-admission`): a keeper never keeps a reconcile pass from running, and
  two replicas take turns (each pass brings OPA's documents to what it decided by a PATCH of
  the difference from what OPA holds, so a pass after another's writes only what changed).
- Resident (`fleetplane controller reconcile --watch`, `controller.resident`): once a period the
  pass is the whole reconcile pass, on the same watched copy, under the controller's Lease, its
  metrics published as the CronJob's are; the CronJob is then not declared. At 10,000 nodes
  that pass took 3.5 s where the CronJob's, which lists the fleet, took 6-7 (docs/scale.md).
- A part that is down (API server, OPA) is logged and tried again, after `interval` doubled
  for each failure in a row up to `MAX_BACKOFF`; no pass runs while the watched copy is not
  current (a failed list, a broken watch: it is listed again); the reservations already in
  OPA lapse on their own (`expires_at`) if it stays down.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace

from controller.config import FleetView, Settings
from controller.log import Log
from controller.observe.kube import KubeClient
from controller.observe.watched import WatchedFleet
from controller.reconcile import run_pass
from controller.summary import Summary

LEASE_SUFFIX = "-admission"
MAX_BACKOFF = 60.0
"""Seconds, at most, between two tries while a part stays down."""


def keep_admission_data(
    *,
    kube: KubeClient,
    fleet: FleetView,
    settings: Settings,
    interval: float,
    refresh: float,
    stop: threading.Event,
    log: Log,
    full_every: float | None = None,
    publish: Callable[[Summary], None] | None = None,
) -> int:
    """Run admission passes until `stop` is set; the number of passes run.

    `full_every` (a resident controller, `reconcile --watch`): every `full_every` seconds, the
    first at once, the pass is a whole reconcile pass (every concern, the team metrics, under
    the controller's own Lease, its summary given to `publish`) on the same watched copy,
    instead of an admission pass; the CronJob's pass without its lists (docs/scale.md)."""
    keeper = replace(settings, lease_name=settings.lease_name + LEASE_SUFFIX)
    passes = failures = 0
    log.info(
        "keeper.start", interval_seconds=interval, refresh_seconds=refresh, full_every=full_every
    )
    watched = WatchedFleet.start(kube, log=log, stop=stop)
    next_full = time.monotonic()
    while not stop.is_set():
        began = time.monotonic()
        wait = min(interval * 2**failures, MAX_BACKOFF)
        problem = watched.problem()
        if problem is not None:
            failures += 1
            log.error("keeper.list.failed", error=problem, retry_in_seconds=wait)
            stop.wait(wait)
            continue
        # whatever changes after this, the pass may not see: the next one will
        seen = watched.pods.changes
        full = full_every is not None and began >= next_full
        if full:
            next_full = began + (full_every or 0.0)
            summary = run_pass(kube=kube, fleet=fleet, settings=settings, log=log, watched=watched)
            if publish is not None:
                publish(summary)
        else:
            summary = run_pass(
                kube=kube,
                fleet=fleet,
                settings=keeper,
                concerns=("admission",),
                log=log,
                watched=watched,
                team_metrics=False,  # an admission pass publishes no metrics
            )
        passes += 1
        log.info(
            "keeper.pass",
            kind="full" if full else "admission",
            errors=summary.errors,
            skipped=summary.skipped or None,
        )
        failures = failures + 1 if summary.errors else 0
        deadline = began + refresh if full_every is None else min(began + refresh, next_full)
        woken_by = watched.pods.wait_for_change(seen, deadline, stop)
        log.info("keeper.wake", reason=woken_by or ("stop" if stop.is_set() else "refresh"))
        stop.wait(max(0.0, began + wait - time.monotonic()))
    log.info("keeper.stop", passes=passes)
    return passes
