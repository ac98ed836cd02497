"""Deleting one judged pod, as the lifetime concern's orphan reclaim and straggler restart do:
a dry run says what it would do; the delete names the pod's uid, so a pod gone or recreated
under the same name since the snapshot is never deleted unjudged; a failure is an Event on the
pod and raised (logged and counted by the concern); success is an Event and a done action.
The delete itself (`delete_exactly`) is also idle reclamation's of a bare pod."""

from __future__ import annotations

from typing import Any

from controller.act.events import ObjectRef
from controller.act.runtime import Runtime
from controller.errors import ConflictError, ControllerError, InjectedFault, NotFoundError
from controller.observe.kube import pod_path
from controller.observe.model import Pod


def delete_judged_pod(
    rt: Runtime,
    concern: str,
    action: str,
    pod: Pod,
    ref: ObjectRef,
    why: str,
    *,
    done_event: str,
    failed_event: str,
    **extra: Any,
) -> bool:
    """True when the pod was deleted (or would be, in a dry run)."""
    if rt.dry_run:
        rt.would(concern, action, pod.key, why)
        return True
    path = pod_path(pod.namespace, pod.name)
    if not delete_exactly(
        rt, path, pod.uid, ref, why, failed_event, f"{concern}.{action}", pod=pod.key
    ):
        return False
    rt.events.emit(ref, done_event, why, warning=True)
    rt.done(concern, action, pod.key, why, **extra)
    return True


def delete_exactly(
    rt: Runtime,
    path: str,
    uid: str,
    ref: ObjectRef,
    why: str,
    failed_event: str,
    logged_as: str,
    **subject: str,
) -> bool:
    """Delete the pod at `path` only if it is still the one with `uid`: False when it is gone
    or another pod holds the name (logged as `<logged_as>.gone`, `.replaced`, with `subject`).
    A failure is an Event `failed_event` on `ref` and raised (logged and counted by
    Runtime.guarded); an injected fault is raised as it is."""
    try:
        rt.kube.delete(path, {"preconditions": {"uid": uid}})
    except NotFoundError:
        rt.log.info(f"{logged_as}.gone", **subject)
        return False
    except ConflictError:
        rt.log.info(f"{logged_as}.replaced", **subject)
        return False
    except InjectedFault:
        raise
    except ControllerError as error:
        rt.events.emit(ref, failed_event, f"{why}; deleting the pod failed: {error}", warning=True)
        raise
    return True
