"""Kubernetes Events (core/v1) on the objects the controller touches: reason + message saying
why. Best effort: the action has already happened when its Event is written, so a failure to
record it is logged and does not fail the action."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Any

from controller.errors import ControllerError
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
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{obj.name}.", "namespace": obj.namespace},
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
        try:
            self.kube.create(f"/api/v1/namespaces/{obj.namespace}/events", body)
            self.recorded += 1
        except ControllerError as error:
            self.log.warning("event.failed", object=str(obj), reason=reason, error=str(error))
