"""A preemption's or a fair-share reclaim's victim that is an operator's pod: its workload is
stopped through its own API, never its pods evicted (issue 30, item 4).

Evicting a TrainJob's, JobSet's, RayJob's, RayCluster's or LeaderWorkerSet's pod would only make
its operator create it again (and a gang missing a pod holds its other pods' devices for
nothing). The decide step took the victim with every other pod of its workload as one gang
(`decide.preempt.workload_gangs`), each judged a victim in its own right and the victim put to
the policy; here the workload is stopped the way idle reclaim and the max-runtime stop do it
(`act.owners.stop_operator_workload`: the owners climbed through the API to the top, every uid
confirmed, `spec.suspend: true` or an LWS's `spec.replicas: 0` with the record of why), and the
Events are written on the top object and on each pod of it. A suspended workload stays
suspended: nothing in the controller resumes it; its team does (`kubectl patch ... suspend:
false`) when the room is there again.

Under --dry-run the climb is read (GETs only) so the line names the object that would be
stopped, the top (a TrainJob, not its JobSet), or why it would not be.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from controller.act.events import ObjectRef
from controller.act.owners import Top, planned_stop, stop_operator_workload
from controller.act.runtime import Runtime
from controller.decide.preempt import Candidate
from controller.decide.workloads import Target, operator_target
from controller.observe.model import Pod


class Stopped(StrEnum):
    """What became of a victim's workload."""

    STOPPED = "stopped"
    """Written now (or would be, under --dry-run): its pods are going."""
    GONE = "gone"
    """Gone, or stopped already: its devices are free or being freed."""
    REFUSED = "refused"
    """Not the workload judged, or one that cannot be stopped (logged): it stays."""


@dataclass(frozen=True, slots=True)
class _Judged:
    pod: Pod
    warned_at: float | None = None


@dataclass(frozen=True, slots=True)
class _Item:
    """The workload to stop and the pods judged with it (the victim and its mates)."""

    target: Target
    pods: Sequence[_Judged]


def operator_workload(victim: Candidate) -> Target | None:
    """The operator's object the victim's owners and labels name, or None: evict the pod."""
    return operator_target(victim.pod)


def stop_victim_workload(
    rt: Runtime,
    concern: str,
    victim: Candidate,
    why: str,
    *,
    event_reason: str,
    **fields: str,
) -> Stopped:
    """Stop the victim's operator workload (`operator_workload` is not None for it); `why` is
    recorded on the top object and in the Events (`event_reason`) on it and on every pod."""
    target = operator_workload(victim)
    assert target is not None
    item = _Item(target, tuple(_Judged(pod) for pod in (victim.pod, *victim.mates)))
    if rt.dry_run:
        top = planned_stop(rt, target, item)
        if isinstance(top, str):
            return _refused(rt, concern, target, top)
        if top is None:
            rt.out.write(f"DRY-RUN {concern}: {target.key} is gone or stopped already\n")
            return Stopped.GONE
        rt.would(concern, f"stop ({target.method})", _name(top, target), why, **fields)
        return Stopped.STOPPED
    stopped = stop_operator_workload(rt, target, item, why)
    if stopped is None:
        rt.log.info(f"{concern}.stop.gone", target=target.key, reason="gone or stopped already")
        rt.summary.action(concern, "stop", "gone")
        return Stopped.GONE
    if isinstance(stopped, str):
        return _refused(rt, concern, target, stopped)
    rt.events.emit(stopped, event_reason, why, warning=True)
    for judged in item.pods:
        pod = judged.pod
        ref = ObjectRef(
            api_version="v1", kind="Pod", namespace=pod.namespace, name=pod.name, uid=pod.uid
        )
        rt.events.emit(
            ref, event_reason, f"{why} (via {stopped.kind} {stopped.name})", warning=True
        )
    rt.done(concern, "stop", f"{stopped.kind}/{stopped.namespace}/{stopped.name}", why, **fields)
    return Stopped.STOPPED


def _name(top: Top, target: Target) -> str:
    return f"{top.kind.kind} {target.namespace}/{top.name}"


def _refused(rt: Runtime, concern: str, target: Target, reason: str) -> Stopped:
    rt.log.info(f"{concern}.stop.changed", target=target.key, reason=reason, action="none")
    rt.summary.action(concern, "stop", "changed")
    return Stopped.REFUSED
