"""Which running accelerator pods an autoscaler must not disrupt now, and what to write.

Karpenter (consolidation, drift, expiry) does not voluntarily disrupt a node that runs a pod
annotated `karpenter.sh/do-not-disrupt: "true"`. The controller's own evictions (preemption,
driver upgrades, GPU remediation, lifetime stops) wait for checkpoints, take gangs whole and
honour minimum run times; this concern holds the autoscaler to the same rules by setting that
annotation on the pods whose disruption now would lose protected work, and clearing it when
the reason is gone. The rules are the policy's (`fleetplane/decisions/disruption`); this module
gathers each pod's facts (`facts`) and turns the answers into marks (`plan_marks`).

Ownership: the controller clears only the annotations it set. It writes
`fleetplane.dev/do-not-disrupt-by: controller` with its own `karpenter.sh/do-not-disrupt`, and
a pod that carries the Karpenter annotation without that mark (its owner's choice) is never
touched. A pod the policy could not judge (OPA failed, an answer missing) keeps what it has:
the concern protects on missing evidence, never unprotects.

Judged: running pods bound to a node, holding accelerators, not terminating, not exempt
(`fleetplane.dev/exempt=true`: the controller leaves them alone), not freed by an earlier
concern of the pass.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, Protocol

from controller.decide.maxruntime import checkpoints
from controller.decide.workloads import annotation_number, gang_of, gangs
from controller.observe.model import Pod
from fleet import labels as keys

DO_NOT_DISRUPT: Final = "karpenter.sh/do-not-disrupt"
"""Karpenter's contract: a pod (or node) with this annotation set to "true" is not disrupted
voluntarily (consolidation, drift, expiry wait; a forceful expiry after the NodePool's
terminationGracePeriod does not)."""
PROTECTED_BY: Final = "fleetplane.dev/do-not-disrupt-by"
"""Set with the controller's own `karpenter.sh/do-not-disrupt`: the controller set it, so it may
clear it. Value `controller`."""
PROTECTED_REASON: Final = "fleetplane.dev/do-not-disrupt-reason"
"""Why the controller protects the pod (the policy's reasons), for people."""
OWNER: Final = "controller"


def trusted_checkpoint(pod: Pod, now: float) -> float | None:
    """The pod's `fleetplane.dev/last-checkpoint` when it is a plausible time at `now` (epoch
    seconds, finite, after 1970, not in the future; nodeflow.pods reads it the same way), else
    None: a malformed or future value counts as no checkpoint."""
    at = annotation_number(pod, keys.LAST_CHECKPOINT)
    if at is None or not math.isfinite(at) or at <= 0 or at > now:
        return None
    return at


def running_seconds(pod: Pod, now: float) -> int:
    """Whole seconds since the pod started, as `int(now) - int(started)` (at least 0; 0 when its
    start is unknown): `now - running_seconds` is then `int(started)` on every pass, the
    instant the policy names in its reasons, where `int(now - started)` wobbled by a second
    between passes and so rewrote a protected pod's reason (docs/contracts.md)."""
    if not pod.started:
        return 0
    return max(0, int(now) - int(pod.started))


def judged(pod: Pod, freed: frozenset[str]) -> bool:
    return (
        pod.phase == "Running"
        and bool(pod.node_name)
        and pod.devices > 0
        and not pod.deleting
        and not pod.exempt
        and pod.uid not in freed
    )


def facts(
    pods: list[Pod], now: float, freed: frozenset[str] = frozenset()
) -> list[tuple[Pod, dict[str, Any]]]:
    """Each judged pod with its policy input. A gang's checkpoint is its oldest member's (None
    when any running member has none): the gang loses everything back to it when split.

    The input's `pod` is the pod's metadata only (`{"metadata": ...}`, its own label and
    annotation dicts, not copied): the policy reads no spec or status, its rules read the facts
    worked out here, and OPA converting a whole Pod per pod was half its cost of a batched
    decision (docs/scale.md)."""
    live = [pod for pod in pods if pod.uid not in freed]
    groups = gangs(live)
    out: list[tuple[Pod, dict[str, Any]]] = []
    for pod in live:
        if not judged(pod, freed):
            continue
        gang: dict[str, Any] | None = None
        key = gang_of(pod)
        members = groups.get(key) if key is not None else None
        if key is not None and members:
            stamps = [trusted_checkpoint(member, now) for member in members]
            gang = {
                "name": f"{key[0]}/{key[1]}",
                "members": len(members),
                "last_checkpoint": None if None in stamps else int(min(s for s in stamps if s)),
            }
        checkpoint = trusted_checkpoint(pod, now)
        out.append(
            (
                pod,
                {
                    "pod": {"metadata": pod.metadata()},
                    "workload_type": pod.workload_type or "",
                    "now": int(now),
                    "running_seconds": running_seconds(pod, now),
                    "checkpoints": checkpoints(pod),
                    "last_checkpoint": None if checkpoint is None else int(checkpoint),
                    "gang": gang,
                },
            )
        )
    return out


class Change(StrEnum):
    PROTECT = "protect"
    UNPROTECT = "unprotect"


@dataclass(frozen=True, kw_only=True)
class Mark:
    pod: Pod
    change: Change
    reason: str


class Answer(Protocol):
    """The policy's answer for one pod (`act.opa.Decision`): allow (it may be disrupted), and
    its reasons in one line."""

    @property
    def allow(self) -> bool: ...

    def because(self) -> str: ...


def ours(pod: Pod) -> bool:
    return pod.annotations.get(PROTECTED_BY) == OWNER


def protected(pod: Pod) -> bool:
    return pod.annotations.get(DO_NOT_DISRUPT) == "true"


def plan_marks(answers: Iterable[tuple[Pod, Answer | None]]) -> list[Mark]:
    """The writes the answers call for. None (no answer) changes nothing. A pod protected by
    someone else is left alone either way; one we protect is cleared only on an allow, and its
    reason refreshed when it changed."""
    marks: list[Mark] = []
    for pod, answer in answers:
        if answer is None:
            continue
        reason = answer.because()[:1000]
        if not answer.allow:
            if not protected(pod) or (
                ours(pod) and pod.annotations.get(PROTECTED_REASON) != reason
            ):
                marks.append(Mark(pod=pod, change=Change.PROTECT, reason=reason))
        elif ours(pod):
            marks.append(Mark(pod=pod, change=Change.UNPROTECT, reason=reason))
    return marks


def annotations_for(mark: Mark) -> dict[str, str | None]:
    """The pod annotations a mark writes (None removes one)."""
    if mark.change is Change.PROTECT:
        return {DO_NOT_DISRUPT: "true", PROTECTED_BY: OWNER, PROTECTED_REASON: mark.reason}
    return dict.fromkeys((DO_NOT_DISRUPT, PROTECTED_BY, PROTECTED_REASON))
