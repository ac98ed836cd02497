"""A list the API server's watch cache cannot answer yet: retried within the pass.

Recent kube-apiservers serve a consistent list (no `resourceVersion`) from the watch cache: they
read etcd's current revision, wait up to 3 s for the cache to reach it, and past that answer
HTTP 504 with the Status of `storage.NewTooLargeResourceVersionError` (k8s.io/apiserver):

    {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
     "message": "Timeout: Too large resource version: 1042, current: 1017",
     "reason": "Timeout",
     "details": {"causes": [{"reason": "ResourceVersionTooLarge",
                             "message": "Too large resource version"}],
                 "retryAfterSeconds": 1},
     "code": 504}

That happens when etcd takes writes faster than the cache follows them: the bench writing 4,000
to 8,000 pods a second straight into etcd had the first pass of a fresh 5,000-node cluster fail
on it. The cache catches up in seconds, so the list is asked again after the server's
`retryAfterSeconds` (client-go's reflector lists again too) instead of failing the whole pass;
`ATTEMPTS` bounds the wait (with the server's 3 s each, about 11 s). Any other 5xx, a 504 from a
request timeout included, is a TemporaryError at once, as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from controller.errors import TemporaryError
from controller.log import Log

CAUSE = "ResourceVersionTooLarge"
"""`metav1.CauseTypeResourceVersionTooLarge`: the Status cause's `reason` (its Go field `Type`)."""
ATTEMPTS = 3
"""Tries of one list request, the first included."""
MAX_PAUSE = 2.0
"""Most seconds between two tries, whatever `retryAfterSeconds` says."""
T = TypeVar("T")


class CacheBehindError(TemporaryError):
    """HTTP 504 "Too large resource version": the API server's watch cache is behind etcd."""

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def too_large_resource_version(status: Mapping[str, Any]) -> bool:
    """Whether an error Status (JSON, or protobuf turned into the same dict) is the cache's
    "Too large resource version", as `storage.IsTooLargeResourceVersion` decides: reason
    Timeout and a `ResourceVersionTooLarge` cause."""
    if status.get("reason") != "Timeout":
        return False
    details = status.get("details")
    causes = details.get("causes") if isinstance(details, Mapping) else None
    return isinstance(causes, list) and any(
        isinstance(cause, Mapping) and cause.get("reason") == CAUSE for cause in causes
    )


def retry_after(status: Mapping[str, Any]) -> float:
    """The Status's `retryAfterSeconds` (1 from a kube-apiserver), within (0, MAX_PAUSE]."""
    details = status.get("details")
    seconds = details.get("retryAfterSeconds") if isinstance(details, Mapping) else None
    if not isinstance(seconds, int | float) or seconds <= 0:
        return 1.0
    return min(float(seconds), MAX_PAUSE)


def while_cache_behind(ask: Callable[[], T], path: str, log: Log) -> T:
    """`ask()`, asked again while it fails with CacheBehindError, `ATTEMPTS` tries in all,
    each retry logged; still behind after them, a TemporaryError naming the cause."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return ask()
        except CacheBehindError as error:
            if attempt == ATTEMPTS:
                raise TemporaryError(
                    f"{error} (the API server's watch cache was still behind etcd, {CAUSE}, "
                    f"after {ATTEMPTS} tries)"
                ) from error
            log.warning(
                "observe.list-retried",
                path=path,
                attempt=attempt,
                reason=CAUSE,
                error=str(error),
                pause_seconds=error.retry_after,
            )
            time.sleep(error.retry_after)
    raise AssertionError("unreachable")
