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
from collections.abc import Callable, Iterator
from typing import Any

from controller.act.opa_files import keep_for_opa, keep_shards
from controller.act.runtime import Runtime
from controller.errors import TemporaryError
from controller.observe.endpoints import Endpoint, ready_endpoints


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
    endpoints = _opa_replicas(rt, what)
    if endpoints is None:
        return "", rt.opa.sync_data_here(path, document, depth, what=what)
    failed, written = rt.opa.sync_data(path, document, depth, endpoints)
    return _reached_all(rt, what, endpoints, failed), written


def put_everywhere(rt: Runtime, path: str, document: Any, what: str) -> str:
    """PUT `document` at `data.<path>` of every ready replica of the in-cluster OPA Service, or
    of `controller.opa_url` when OPA is one server; `what` names it in errors. A replica not
    written is a TemporaryError (the others are written all the same). Returns what to add to
    the done line: ", to all N OPA replicas", or nothing for the one server."""
    endpoints = _opa_replicas(rt, what)
    if endpoints is None:
        rt.opa.put_data(path, document, what=what)
        return ""
    return _reached_all(rt, what, endpoints, rt.opa.put_data_to(path, document, endpoints))


def _opa_replicas(rt: Runtime, what: str) -> list[Endpoint] | None:
    """The ready replicas of the in-cluster OPA Service, to write `what` to; None when OPA is
    one server (`controller.opa_url`); a TemporaryError when no replica is ready."""
    service = rt.settings.opa_service
    if service is None:
        return None
    namespace, _, name = service.partition("/")
    endpoints = ready_endpoints(rt.kube, namespace, name)
    if not endpoints:
        raise TemporaryError(f"Service {service}: no ready OPA replica to publish {what} to")
    return endpoints


def _reached_all(rt: Runtime, what: str, endpoints: list[Endpoint], failed: list[str]) -> str:
    """What to add to the done line once `what` was written to `endpoints` (`_opa_replicas`);
    a TemporaryError naming the replicas `failed` (each a sentence) when any did."""
    if failed:
        raise TemporaryError(
            f"{what} reached {len(endpoints) - len(failed)} of {len(endpoints)} OPA "
            f"replicas of Service {rt.settings.opa_service}; not: " + "; ".join(failed)
        )
    return f", to all {len(endpoints)} OPA replicas"


def keep(rt: Runtime, concern: str, key: str, document: Any, summary: str) -> None:
    """Write `document` under `key` of the ConfigMap OPA loads at start (none configured:
    nothing to do); logged as `<concern>.keep`."""

    def write(configmap: str) -> dict[str, Any]:
        return {"bytes": keep_for_opa(rt.kube, configmap, key, document)}

    _kept(rt, concern, "", key, summary, write)


def keep_sharded(
    rt: Runtime, concern: str, doc: str, document: dict[str, Any], summary: str
) -> None:
    """`keep` for a document that grows with the fleet: split over ConfigMaps beside the
    configured one (controller/act/opa_files.py `keep_shards`), the changed parts written."""

    def write(configmap: str) -> dict[str, Any]:
        with collector_paused():
            size, written = keep_shards(rt.kube, configmap, doc, document)
        return {"bytes": size, "parts_written": written}

    _kept(rt, concern, f"-{doc}-*", doc, summary, write)


def _kept(
    rt: Runtime,
    concern: str,
    suffix: str,
    what: str,
    summary: str,
    write: Callable[[str], dict[str, Any]],
) -> None:
    """`write(configmap)` (what it returns: the done line's fields) for `keep` and
    `keep_sharded`, as `<concern>.keep` of `ConfigMap/<configmap><suffix>`; only said under
    --dry-run; nothing without a configured ConfigMap."""
    configmap = rt.settings.opa_data_configmap
    if configmap is None:
        return
    target = f"ConfigMap/{configmap}{suffix}"
    reason = f"{what} for OPA's next start: {summary}"
    if rt.dry_run:
        rt.would(concern, "keep", target, reason)
        return
    rt.guarded(
        concern,
        "keep",
        target,
        lambda: rt.done(concern, "keep", target, reason, **write(configmap)),
    )


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
