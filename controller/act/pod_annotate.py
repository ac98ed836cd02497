"""Annotating one judged pod, as the idle and lifetime concerns write their timers: a merge
patch of the pod's annotations on the version judged, and after a conflict on the version read
again, but never on another pod recreated under the same name, and not when the fresh pod no
longer wants the change (`unwanted`). The caller says what each outcome means (a log line, an
Event); dry runs are the caller's too, since each words what it would do."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controller.act.runtime import Runtime
from controller.act.writes import patch_fresh
from controller.errors import NotFoundError
from controller.observe.kube import pod_path
from controller.observe.model import Pod


class Outcome(enum.Enum):
    WRITTEN = "written"
    GONE = "gone"
    """The pod no longer exists."""
    REPLACED = "replaced"
    """Another pod (`Annotated.uid`) holds the name now: not the one judged."""
    UNWANTED = "unwanted"
    """The fresh pod already says what the change would (`unwanted` said so)."""


@dataclass(frozen=True, slots=True)
class Annotated:
    outcome: Outcome
    uid: str = ""
    """The uid found under the pod's name, for REPLACED."""

    @property
    def written(self) -> bool:
        return self.outcome is Outcome.WRITTEN


def annotate_judged_pod(
    rt: Runtime,
    pod: Pod,
    annotations: dict[str, str | None],
    *,
    unwanted: Callable[[dict[str, str]], bool] | None = None,
) -> Annotated:
    """Write `annotations` (None removes a key) on the pod that was judged."""
    found: list[Annotated] = []

    def build(current: dict[str, Any] | None) -> dict[str, Any] | None:
        if current is not None:
            metadata = current.get("metadata") or {}
            uid = str(metadata.get("uid") or "")
            if uid != pod.uid:
                found.append(Annotated(Outcome.REPLACED, uid))
                return None
            if unwanted is not None and unwanted(metadata.get("annotations") or {}):
                found.append(Annotated(Outcome.UNWANTED))
                return None
        return {"metadata": {"annotations": annotations}}

    try:
        written = patch_fresh(
            rt.kube, pod_path(pod.namespace, pod.name), pod.resource_version, build
        )
    except NotFoundError:
        return Annotated(Outcome.GONE)
    if written is None:
        return found[0] if found else Annotated(Outcome.UNWANTED)
    return Annotated(Outcome.WRITTEN)
