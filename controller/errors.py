"""Errors, split the way the pass reacts to them.

A `TemporaryError` (timeout, connection refused, 5xx, 409 conflict, 429) may succeed on the
next pass or after a re-read; a `PermanentError` (other 4xx, malformed answers) will not, and
is reported as such. The pass never turns either into an action: no evidence, no action.
"""

from __future__ import annotations


class ControllerError(Exception):
    """Base of the controller's own errors."""


class TemporaryError(ControllerError):
    """Worth retrying later: the server was unreachable, slow, overloaded or raced us."""


class PermanentError(ControllerError):
    """Will fail again the same way: a bad request, a missing permission, a malformed answer."""


class ConflictError(TemporaryError):
    """HTTP 409: the object changed since it was read (re-read and retry once)."""


class TooManyRequestsError(TemporaryError):
    """HTTP 429: for an eviction, a PodDisruptionBudget forbids it right now."""


class NotFoundError(PermanentError):
    """HTTP 404: the object (or the API) does not exist."""


class LeaseHeldError(ControllerError):
    """Another run holds the controller's Lease; this run does nothing."""


class InjectedFault(ControllerError):
    """Raised by a test hook to simulate a run killed half way."""


def error_kind(error: ControllerError) -> str:
    """ "temporary" or "permanent": how an error is counted and logged."""
    return "temporary" if isinstance(error, TemporaryError) else "permanent"
