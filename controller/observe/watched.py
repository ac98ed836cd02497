"""Pods and nodes kept current by a watch, for the long-running admission keeper.

A CronJob pass lists every pod and node: at 10,000 nodes and 100,000 pods that is about a
hundred pages the API server encodes and this process decodes, every pass, whatever changed
(docs/scale.md has the figures). A process that runs between passes (the admission keeper,
controller/admission_keeper.py) lists once and then follows the collection's watch: its passes
read the copy the watch keeps, and the API server sends only what changed. This is client-go's
reflector at its simplest: list at a version, watch from it (bookmarks keep the version fresh
on a quiet collection), and list again after any error, so the copy is either current or
known not to be.

A pass decides on the copy only while it is current: after a failed list or a broken watch,
`items` raises a TemporaryError naming what failed until a new list succeeds (no evidence, no
action), exactly as a failed list stops a CronJob pass.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from controller.errors import ControllerError, TemporaryError
from controller.log import Log
from controller.observe.kube import KubeClient
from controller.observe.model import (
    Node,
    Pod,
    accelerator_pod_from_api,
    node_from_api,
)
from controller.observe.proto import NodeList, PodList, accelerator_pod_from_proto, node_from_proto

T = TypeVar("T")

WATCH_SECONDS = 60
"""How long one watch request lasts before it is made again from the newest version."""
MAX_BACKOFF = 30.0
"""Seconds, at most, between two lists while the API server keeps failing."""
WAKES = frozenset({"ADDED", "DELETED"})


@dataclass(frozen=True, slots=True)
class Collection(Generic[T]):
    """What is watched: its path, its protobuf list message, and its views from protobuf (the
    list) and JSON (the watch's events); a view of None leaves the object out."""

    noun: str
    path: str
    list_type: Any
    from_proto: Callable[[Any], T | None]
    from_api: Callable[[Any], T | None]


PODS: Collection[Pod] = Collection(
    "pod", "/api/v1/pods", PodList, accelerator_pod_from_proto, accelerator_pod_from_api
)
NODES: Collection[Node] = Collection(
    "node", "/api/v1/nodes", NodeList, node_from_proto, node_from_api
)


class Watched(Generic[T]):
    """One collection, listed and then kept by its watch in a thread of its own (`keep`)."""

    def __init__(
        self,
        kube: KubeClient,
        collection: Collection[T],
        *,
        log: Log,
        page: int = 500,
        watch_seconds: int = WATCH_SECONDS,
    ) -> None:
        self._kube, self.collection, self._log = kube, collection, log
        self._page, self._watch_seconds = page, watch_seconds
        self._changed = threading.Condition()
        self._items: dict[str, T] = {}
        self._version = ""
        self._problem: str | None = "not listed yet"
        self._tried = threading.Event()
        self.changes = 0
        """Objects created or deleted, and lists after the first, since the start: a pass that
        saw `changes` at N has missed something once it is above N."""
        self.last_change = ""
        self.lists = 0

    # what a pass reads ------------------------------------------------------------------------

    def items(self) -> list[T]:
        """The objects as the watch has them now; a TemporaryError while the copy is not
        current (not listed yet, or its watch broke and the list again has not succeeded)."""
        with self._changed:
            if self._problem is not None:
                raise TemporaryError(
                    f"{self.collection.path}: the watched copy is not current: {self._problem}"
                )
            return list(self._items.values())

    def problem(self) -> str | None:
        """Why the copy is not current, or None."""
        with self._changed:
            return self._problem

    def wait_tried(self, stop: threading.Event) -> None:
        """Until the first list has succeeded or failed, or `stop`."""
        while not stop.is_set() and not self._tried.wait(0.2):
            pass

    def wait_for_change(self, seen: int, deadline: float, stop: threading.Event) -> str | None:
        """Until `changes` is above `seen` (what changed, the last of it), the copy stops being
        current (why), `deadline` on the monotonic clock or `stop` (None)."""
        with self._changed:
            while not stop.is_set():
                if self._problem is not None:
                    return f"{self.collection.path}: {self._problem}"
                if self.changes > seen:
                    return self.last_change
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                # woken by a change; at least once a second, so `stop` is seen
                self._changed.wait(min(left, 1.0))
        return None

    # the thread that keeps it -----------------------------------------------------------------

    def keep(self, stop: threading.Event) -> None:
        """List, then follow the watch, until `stop`; after an error list again, waiting twice
        as long after each failure in a row (up to MAX_BACKOFF)."""
        failures = 0
        while not stop.is_set():
            try:
                if not self._version:
                    self._list()
                self._follow(stop)
                # only a watch that lasted its time ends the failures in a row: a watch refused
                # at once after every list must not make a list of the fleet every half second
                failures = 0
            except ControllerError as error:
                failures += 1
                wait = min(0.5 * 2 ** (failures - 1), MAX_BACKOFF)
                with self._changed:
                    self._problem = str(error)
                    self._version = ""
                    self._changed.notify_all()
                self._tried.set()
                self._log.error(
                    "watched.failed",
                    path=self.collection.path,
                    error=str(error),
                    retry_in_seconds=wait,
                )
                stop.wait(wait)

    def _list(self) -> None:
        collection = self.collection
        listed = self._kube.list_protobuf_at_version(
            collection.path,
            collection.list_type,
            _keyed(collection.from_proto, _proto_uid),
            _keyed(collection.from_api, _json_uid),
            limit=self._page,
        )
        if not listed.version:
            raise TemporaryError(f"GET {collection.path}: the list has no resourceVersion")
        with self._changed:
            self._items = dict(listed.items)
            self._version = listed.version
            self._problem = None
            if self.lists:
                # what changed while the copy was not current is not known: a change
                self.changes += 1
                self.last_change = f"{collection.path} listed again"
            self.lists += 1
            self._changed.notify_all()
        self._tried.set()
        self._log.info(
            "watched.listed", path=collection.path, kept=len(listed.items), version=listed.version
        )

    def _follow(self, stop: threading.Event) -> None:
        """One watch request from the version held, applying its events, until it ends."""
        for event in self._kube.watch(
            self.collection.path,
            resource_version=self._version,
            timeout_seconds=self._watch_seconds,
        ):
            self._apply(event)
            if stop.is_set():
                return

    def _apply(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        raw = event.get("object")
        metadata = raw.get("metadata") if isinstance(raw, dict) else None
        if not isinstance(metadata, dict):
            raise TemporaryError(f"WATCH {self.collection.path}: a {kind} event has no metadata")
        version = metadata.get("resourceVersion")
        converted = None
        if kind in ("ADDED", "MODIFIED"):
            converted = self.collection.from_api(raw)  # a DecodeError ends the watch: relist
        with self._changed:
            if isinstance(version, str) and version:
                self._version = version
            if kind == "BOOKMARK":
                return
            uid = _json_uid(raw)
            if converted is None:
                self._items.pop(uid, None)
            else:
                self._items[uid] = converted
            if kind in WAKES:
                self.changes += 1
                where = "/".join(filter(None, (metadata.get("namespace"), metadata.get("name"))))
                self.last_change = f"{self.collection.noun} {str(kind).lower()} {where}"
                self._changed.notify_all()


def _proto_uid(item: Any) -> str:
    return str(item.metadata.uid)


def _json_uid(raw: Any) -> str:
    metadata = raw.get("metadata") or {}
    return str(metadata.get("uid") or f"{metadata.get('namespace')}/{metadata.get('name')}")


def _keyed(
    convert: Callable[[Any], T | None], uid: Callable[[Any], str]
) -> Callable[[Any], tuple[str, T] | None]:
    """A list item's view with its uid, the key its watch events name it by."""

    def keyed(raw: Any) -> tuple[str, T] | None:
        converted = convert(raw)
        return None if converted is None else (uid(raw), converted)

    return keyed


@dataclass(frozen=True, slots=True)
class WatchedFleet:
    """The accelerator pods and the nodes a pass reads, each kept by its own watch."""

    pods: Watched[Pod]
    nodes: Watched[Node]

    @classmethod
    def start(cls, kube: KubeClient, *, log: Log, stop: threading.Event) -> WatchedFleet:
        """Start keeping both (daemon threads, until `stop`) and wait for their first list."""
        fleet = cls(Watched(kube, PODS, log=log), Watched(kube, NODES, log=log))
        for watched in (fleet.pods, fleet.nodes):
            name = f"watch-{watched.collection.noun}s"
            threading.Thread(target=watched.keep, args=(stop,), name=name, daemon=True).start()
        for watched in (fleet.pods, fleet.nodes):
            watched.wait_tried(stop)
        return fleet

    def problem(self) -> str | None:
        """Why either copy is not current, or None."""
        for watched in (self.pods, self.nodes):
            problem = watched.problem()
            if problem is not None:
                return f"{watched.collection.path}: {problem}"
        return None
