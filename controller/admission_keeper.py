"""Keep the gate's admission data current between passes (`fleetplane controller admission
--watch`, run by a Deployment).

The reconcile CronJob publishes the reservations of admitted workloads once per period, so every
workload admitted within a period was priced against the same spend, as if the others did not
exist. The keeper runs the admission concern's pass (records, reservations, approval bindings:
controller/concerns/admission.py) and then watches pods, and runs it again as soon as one is
created or deleted: a workload admitted now counts against its team once its pods exist and one
snapshot later (tests/controller/test_admission_keeper.py measures it), not at the next period.
Workloads submitted together, before either's pods exist, are held apart by the admission front
(controller/admission_front.py), which reserves as part of admitting; the keeper's reservations
then take over from its entries (the gate counts the same workload uid once).

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
- A part that is down (API server, OPA) is logged and tried again from a fresh list, after
  `interval` doubled for each failure in a row up to `MAX_BACKOFF`; the reservations already in
  OPA lapse on their own (`expires_at`) if it stays down.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from controller.config import FleetView, Settings
from controller.errors import ControllerError
from controller.log import Log
from controller.observe.kube import KubeClient
from controller.reconcile import run_pass

PODS = "/api/v1/pods"
WAKES = frozenset({"ADDED", "DELETED"})
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
) -> int:
    """Run admission passes until `stop` is set; the number of passes run."""
    settings = replace(settings, lease_name=settings.lease_name + LEASE_SUFFIX)
    passes = failures = 0
    log.info("keeper.start", interval_seconds=interval, refresh_seconds=refresh)
    while not stop.is_set():
        began = time.monotonic()
        wait = min(interval * 2**failures, MAX_BACKOFF)
        try:
            # the version before the snapshot: whatever the pass does not see, the watch does
            version = kube.collection_version(PODS)
        except ControllerError as error:
            failures += 1
            log.error("keeper.list.failed", error=str(error), retry_in_seconds=wait)
            stop.wait(wait)
            continue
        summary = run_pass(
            kube=kube, fleet=fleet, settings=settings, concerns=("admission",), log=log
        )
        passes += 1
        log.info("keeper.pass", errors=summary.errors, skipped=summary.skipped or None)
        failures = failures + 1 if summary.errors else 0
        try:
            woken_by = _wait_for_pods(kube, version, began + refresh, stop)
            log.info("keeper.wake", reason=woken_by)
        except ControllerError as error:
            failures += 1
            log.error("keeper.watch.failed", error=str(error), retry_in_seconds=wait)
        stop.wait(max(0.0, began + wait - time.monotonic()))
    log.info("keeper.stop", passes=passes)
    return passes


def _wait_for_pods(kube: KubeClient, version: str, deadline: float, stop: threading.Event) -> str:
    """Until a pod is created or deleted after `version`, the deadline, or `stop`; which one."""
    while not stop.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return "refresh"
        # The API server ends a watch at its timeout: at most a few seconds, so `stop` is seen.
        timeout = max(1, min(int(left), 5))
        for event in kube.watch(PODS, resource_version=version, timeout_seconds=timeout):
            metadata = (event.get("object") or {}).get("metadata") or {}
            if event.get("type") in WAKES:
                where = f"{metadata.get('namespace')}/{metadata.get('name')}"
                return f"pod {str(event['type']).lower()} {where}"
            version = metadata.get("resourceVersion", version)
    return "stop"
