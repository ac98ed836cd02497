"""Kubernetes Events (core/v1) on the objects the controller touches: reason + message saying
why. Best effort: the action has already happened when its Event is written, so a failure to
record it is logged and does not fail the action.

The same Event again (object, reason, message and type) raises the count of the one already
there instead of adding another, as client-go's recorder aggregates them: a gang that cannot
have room says so every pass, and `kubectl describe` shows one line with its count and the
time it was last said. The Event's name is derived from what it says, so a repeat finds it
(AlreadyExists) without listing; an Event the API server has expired (after its TTL, an hour
by default) is written anew."""

from __future__ import annotations

import hashlib
import socket
import time
from dataclasses import dataclass
from typing import Any

from controller.errors import ConflictError, ControllerError
from controller.log import Log
from controller.observe.kube import KubeClient
from controller.observe.model import format_time

COMPONENT = "fleetplane-controller"
MAX_MESSAGE = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectRef:
    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""

    def involved(self) -> dict[str, Any]:
        ref = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "namespace": self.namespace,
        }
        if self.uid:
            ref["uid"] = self.uid
        return ref

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


class EventRecorder:
    def __init__(self, kube: KubeClient, *, dry_run: bool, log: Log | None = None) -> None:
        self.kube = kube
        self.dry_run = dry_run
        self.log = log or Log()
        self.instance = socket.gethostname()
        self.recorded = 0

    def emit(self, obj: ObjectRef, reason: str, message: str, *, warning: bool = False) -> None:
        if self.dry_run:
            return
        stamp = format_time(time.time())
        name = series_name(obj, reason, message, warning)
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": obj.namespace},
            "involvedObject": obj.involved(),
            "reason": reason,
            "message": message[:MAX_MESSAGE],
            "type": "Warning" if warning else "Normal",
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        path = f"/api/v1/namespaces/{obj.namespace}/events"
        try:
            try:
                self.kube.create(path, body)
            except ConflictError:  # said before: count it on the Event that says it
                self._repeat(f"{path}/{name}", stamp)
            self.recorded += 1
        except ControllerError as error:
            self.log.warning("event.failed", object=str(obj), reason=reason, error=str(error))

    def _repeat(self, path: str, stamp: str) -> None:
        """One more of an Event that exists: its count up by one and its last time now, on the
        version read (a 409 from a writer in between is logged by the caller, not retried)."""
        current = self.kube.get(path)
        count = current.get("count")
        self.kube.merge_patch(
            path,
            {
                "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                "count": (count if isinstance(count, int) and count > 0 else 1) + 1,
                "lastTimestamp": stamp,
            },
        )


def series_name(obj: ObjectRef, reason: str, message: str, warning: bool) -> str:
    """The name of the Event that says this of this object: the object's name (as client-go's
    Events start) and a digest of everything that tells one Event from another, the object's
    uid included, so a pod recreated under the same name starts its own series."""
    said = "\0".join(
        (obj.api_version, obj.kind, obj.name, obj.uid, reason, message[:MAX_MESSAGE], str(warning))
    )
    digest = hashlib.sha256(said.encode()).hexdigest()[:16]
    return f"{obj.name[: 253 - len(digest) - 1]}.{digest}"
