"""The coordination.k8s.io/v1 Lease that keeps two passes from overlapping.

A pass takes the Lease before it observes and gives it back when it ends. A Lease held by
another holder whose `renewTime + leaseDurationSeconds` is still in the future means another
pass is running: this one stops without doing anything. A pass that crashed leaves the Lease to
expire (its duration is the controller's period), after which the next pass takes it over.
Taking and releasing carry the resourceVersion read, so two runs racing for it cannot both win.
The Lease uses the wall clock, not the pass's (injectable) decision clock.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from controller.errors import ConflictError, ControllerError, LeaseHeldError, NotFoundError
from controller.log import Log
from controller.observe.kube import KubeClient, object_path


def _micro(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(value: str | None) -> float:
    if not value:
        return 0.0
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def holder_identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class Lease:
    def __init__(
        self, kube: KubeClient, *, namespace: str, name: str, seconds: int, log: Log | None = None
    ) -> None:
        self.kube = kube
        self.path = object_path("coordination.k8s.io/v1", "leases", namespace, name)
        self.collection = object_path("coordination.k8s.io/v1", "leases", namespace, None)
        self.namespace, self.name, self.seconds = namespace, name, seconds
        self.identity = holder_identity()
        self.log = log or Log()
        self.version: str | None = None

    def _spec(self, now: float, transitions: int, acquired: float | None = None) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.seconds,
            "acquireTime": _micro(acquired or now),
            "renewTime": _micro(now),
            "leaseTransitions": transitions,
        }

    def acquire(self) -> None:
        now = time.time()
        try:
            current = self.kube.get(self.path)
        except NotFoundError:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(now, 0),
            }
            try:
                created = self.kube.create(self.collection, body)
            except ConflictError as error:
                raise LeaseHeldError(
                    f"lease {self.namespace}/{self.name} was just taken"
                ) from error
            self.version = created["metadata"]["resourceVersion"]
            self.log.info(
                "lease.acquired", lease=f"{self.namespace}/{self.name}", holder=self.identity
            )
            return
        spec = current.get("spec") or {}
        holder = spec.get("holderIdentity")
        expires = _parse(spec.get("renewTime")) + float(spec.get("leaseDurationSeconds") or 0)
        if holder and holder != self.identity and expires > now:
            raise LeaseHeldError(
                f"lease {self.namespace}/{self.name} is held by {holder} until "
                f"{_micro(expires)}: another pass is running"
            )
        transitions = int(spec.get("leaseTransitions") or 0) + (1 if holder else 0)
        patch = {
            "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
            "spec": self._spec(now, transitions),
        }
        try:
            updated = self.kube.merge_patch(self.path, patch)
        except ConflictError as error:
            raise LeaseHeldError(f"lease {self.namespace}/{self.name} was just taken") from error
        self.version = updated["metadata"]["resourceVersion"]
        self.log.info(
            "lease.acquired",
            lease=f"{self.namespace}/{self.name}",
            holder=self.identity,
            previous=holder,
            previous_expired=bool(holder),
        )

    def renew(self) -> None:
        patch = {
            "metadata": {"resourceVersion": self.version},
            "spec": {"renewTime": _micro(time.time())},
        }
        try:
            self.version = self.kube.merge_patch(self.path, patch)["metadata"]["resourceVersion"]
        except ConflictError as error:
            raise LeaseHeldError(f"lease {self.namespace}/{self.name} was lost") from error

    def release(self) -> None:
        patch = {"metadata": {"resourceVersion": self.version}, "spec": {"holderIdentity": None}}
        try:
            self.kube.merge_patch(self.path, patch)
            self.log.info("lease.released", lease=f"{self.namespace}/{self.name}")
        except ControllerError as error:
            self.log.warning(
                "lease.release.failed", lease=f"{self.namespace}/{self.name}", error=str(error)
            )


@contextmanager
def held(lease: Lease | None) -> Iterator[Lease | None]:
    """Hold the lease for the block (None: no lease, under --dry-run)."""
    if lease is None:
        yield None
        return
    lease.acquire()
    try:
        yield lease
    finally:
        lease.release()
