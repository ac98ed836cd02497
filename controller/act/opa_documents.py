"""Publishing a document the controller keeps for the gate: to OPA, and for OPA's next start.

Each OPA replica keeps its own data, so a document goes to every ready replica of the
in-cluster OPA Service at its pod address (through the Service only one would get it), or to
`controller.opa_url` when OPA is one server; a replica not written is an error of the action
(the others are written all the same, and the next pass writes all again). What is written is
what changed since the replica's last write (controller/act/opa_patch.py), not the document. The same document
goes to the ConfigMap OPA loads at start (controller/act/opa_files.py), so a replica that
restarts judges by it before the next pass. Under --dry-run both only say what they would do.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import Any

from controller.act.opa_files import keep_for_opa, keep_shards
from controller.act.runtime import Runtime
from controller.errors import TemporaryError
from controller.observe.endpoints import ready_endpoints


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: reading, comparing and splitting a fleet's
    document makes hundreds of thousands of small acyclic objects (freed by their counts), on
    which the collector ran generation after generation for nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def publish(
    rt: Runtime, concern: str, path: str, document: Any, summary: str, *, depth: int = 2
) -> None:
    """Bring `data.<path>` of every OPA replica to `document` by writing what changed
    (controller/act/opa_patch.py; object members compared down to `depth` levels: a team's or
    namespace's entries, one by one); logged as `<concern>.publish` with `summary` (what the
    document says, in a few words) and the number of operations written."""
    target = "data." + path.replace("/", ".")
    if rt.dry_run:
        rt.would(concern, "publish", target, summary)
        return

    def write() -> None:
        with collector_paused():
            done, written = sync_everywhere(rt, path, document, target, depth)
        rt.done(concern, "publish", target, summary + done, operations=written)

    rt.guarded(concern, "publish", target, write)


def sync_everywhere(
    rt: Runtime, path: str, document: Any, what: str, depth: int
) -> tuple[str, int]:
    """`put_everywhere`, writing only what differs from what each replica holds; also the
    number of operations written (over all replicas)."""
    service = rt.settings.opa_service
    if service is None:
        return "", rt.opa.sync_data_here(path, document, depth, what=what)
    namespace, _, name = service.partition("/")
    endpoints = ready_endpoints(rt.kube, namespace, name)
    if not endpoints:
        raise TemporaryError(f"Service {service}: no ready OPA replica to publish {what} to")
    failed, written = rt.opa.sync_data(path, document, depth, endpoints)
    if failed:
        raise TemporaryError(
            f"{what} reached {len(endpoints) - len(failed)} of {len(endpoints)} OPA "
            f"replicas of Service {service}; not: " + "; ".join(failed)
        )
    return f", to all {len(endpoints)} OPA replicas", written


def put_everywhere(rt: Runtime, path: str, document: Any, what: str) -> str:
    """PUT `document` at `data.<path>` of every ready replica of the in-cluster OPA Service, or
    of `controller.opa_url` when OPA is one server; `what` names it in errors. A replica not
    written is a TemporaryError (the others are written all the same). Returns what to add to
    the done line: ", to all N OPA replicas", or nothing for the one server."""
    service = rt.settings.opa_service
    if service is None:
        rt.opa.put_data(path, document, what=what)
        return ""
    namespace, _, name = service.partition("/")
    endpoints = ready_endpoints(rt.kube, namespace, name)
    if not endpoints:
        raise TemporaryError(f"Service {service}: no ready OPA replica to publish {what} to")
    failed = rt.opa.put_data_to(path, document, endpoints)
    if failed:
        raise TemporaryError(
            f"{what} reached {len(endpoints) - len(failed)} of {len(endpoints)} OPA "
            f"replicas of Service {service}; not: " + "; ".join(failed)
        )
    return f", to all {len(endpoints)} OPA replicas"


def keep(rt: Runtime, concern: str, key: str, document: Any, summary: str) -> None:
    """Write `document` under `key` of the ConfigMap OPA loads at start (none configured:
    nothing to do); logged as `<concern>.keep`."""
    configmap = rt.settings.opa_data_configmap
    if configmap is None:
        return
    target = f"ConfigMap/{configmap}"
    if rt.dry_run:
        rt.would(concern, "keep", target, f"{key} for OPA's next start: {summary}")
        return

    def write() -> None:
        size = keep_for_opa(rt.kube, configmap, key, document)
        rt.done(concern, "keep", target, f"{key} for OPA's next start: {summary}", bytes=size)

    rt.guarded(concern, "keep", target, write)


def keep_sharded(
    rt: Runtime, concern: str, doc: str, document: dict[str, Any], summary: str
) -> None:
    """`keep` for a document that grows with the fleet: split over ConfigMaps beside the
    configured one (controller/act/opa_files.py `keep_shards`), the changed parts written."""
    configmap = rt.settings.opa_data_configmap
    if configmap is None:
        return
    target = f"ConfigMap/{configmap}-{doc}-*"
    if rt.dry_run:
        rt.would(concern, "keep", target, f"{doc} for OPA's next start: {summary}")
        return

    def write() -> None:
        with collector_paused():
            size, written = keep_shards(rt.kube, configmap, doc, document)
        reason = f"{doc} for OPA's next start: {summary}"
        rt.done(concern, "keep", target, reason, bytes=size, parts_written=written)

    rt.guarded(concern, "keep", target, write)


def publish_records(
    rt: Runtime, concern: str, path: str, records: dict[str, dict[str, Any]], what: str
) -> str:
    """`publish` a document of records by namespace (`data.<path>[namespace][key]`: the
    workload records, the DRA claim records), summed up as "N <what> in M namespaces"; returns
    that summary (for `keep_sharded`)."""
    count = sum(len(found) for found in records.values())
    summary = f"{count} {what} in {len(records)} namespaces"
    publish(rt, concern, path, records, summary)
    return summary
