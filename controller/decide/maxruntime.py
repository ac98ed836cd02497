"""Work past its workload type's maximum runtime: warn, wait for the grace and the next
checkpoint, then stop the workload (its gang whole).

The bound is the type's `default_max_runtime_seconds` (the budget gate priced the workload with
it). A pod that bounds itself is left to Kubernetes, which enforces its bound: its own
`activeDeadlineSeconds` (the kubelet), or its Job's (the Job controller); the gate priced those
instead. A gang (one Volcano PodGroup) is as old as its oldest running member: its members are
warned and stopped together.

Per running pod (`judge`), the first that applies:

1. labelled `fleetplane.dev/exempt=true`                      → EXEMPT
2. no known type, or a type without a maximum                 → UNBOUNDED
3. its own or its Job's activeDeadlineSeconds                 → OWN_DEADLINE (Kubernetes stops it)
4. a batch Job's pod whose Job could not be read, or no start → NO_EVIDENCE (nothing is done)
5. running (its gang's oldest member) up to the maximum       → WITHIN
6. past it, not warned                                        → WARN (warned-at = now, deadline =
                                                                now + stop_grace_seconds)
7. warned, the stop time (`stop_at`) not reached              → WAITING
8. warned, stop time reached                                  → STOP (OPA has the last word)

`stop_at` is the grace deadline, unless the pod checkpoints (`fleetplane.dev/checkpoint-location`,
`last-checkpoint` or `checkpoint-interval-seconds`): then it is also the end of the window in
which its next checkpoint after the warning is due, `checkpoint_due + checkpoint_slack_seconds`,
where checkpoints come every declared interval (capped at `checkpoint_window_seconds`; that
window when none is declared) counted from the last one. A checkpoint recorded after the warning
ends the wait at the grace deadline.

Per workload (the owner, as for idle reclamation: `decide.workloads.reclaim_target`), a stop is
planned only when every non-terminal accelerator pod of it, and of its gang, is STOP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from controller.config import FleetView, LifetimeRules
from controller.decide.workloads import (
    GANG_ANNOTATION,
    Target,
    annotation_number,
    gang_of,
    reclaim_target,
    verdict_counts,
)
from controller.observe.model import Pod
from controller.observe.owners import OwnerFacts, OwnerKey, owner_key
from fleet import labels as keys


class Verdict(StrEnum):
    NOT_RUNNING = "not-running"
    EXEMPT = "exempt"
    UNBOUNDED = "unbounded"
    OWN_DEADLINE = "own-deadline"
    NO_EVIDENCE = "no-evidence"
    WITHIN = "within"
    WARN = "warn"
    WAITING = "waiting"
    STOP = "stop"


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeJudgement:
    pod: Pod
    verdict: Verdict
    reason: str
    running_seconds: float = 0.0
    max_runtime_seconds: int | None = None
    warned_at: float | None = None
    stop_at: float | None = None
    deadline: float | None = None
    """For a warning: the end of the grace (the earliest stop), written on the pod."""

    def opa_input(self, now: float) -> dict[str, Any]:
        """The lifetime decision's input for a `runtime-stop` (docs/contracts.md)."""
        return {
            "action": "runtime-stop",
            "pod": self.pod.manifest(),
            "workload_type": self.pod.workload_type,
            "now": int(now),
            "runtime": {
                "running_seconds": int(self.running_seconds),
                "warned_at": None if self.warned_at is None else int(self.warned_at),
                "stop_at": None if self.stop_at is None else int(self.stop_at),
            },
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class StopPlan:
    target: Target
    pods: tuple[RuntimeJudgement, ...]


@dataclass(kw_only=True)
class RuntimePlan:
    judgements: list[RuntimeJudgement] = field(default_factory=list)
    warn: list[RuntimeJudgement] = field(default_factory=list)
    stop: list[StopPlan] = field(default_factory=list)
    held: list[tuple[Target, str]] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return verdict_counts(self.judgements)


def checkpoints(pod: Pod) -> bool:
    """Whether the pod declares that it checkpoints."""
    return any(
        key in pod.annotations
        for key in (
            keys.CHECKPOINT_LOCATION,
            keys.LAST_CHECKPOINT,
            keys.CHECKPOINT_INTERVAL_SECONDS,
        )
    )


def stop_time(pod: Pod, warned_at: float, rules: LifetimeRules) -> tuple[float, str]:
    """When the pod may be stopped after a warning at `warned_at`, and why then."""
    deadline = warned_at + rules.stop_grace_seconds
    if not checkpoints(pod):
        return deadline, "it declares no checkpoints"
    last = annotation_number(pod, keys.LAST_CHECKPOINT)
    if last is not None and last >= warned_at:
        return deadline, f"it checkpointed at {int(last)}, after the warning"
    declared = annotation_number(pod, keys.CHECKPOINT_INTERVAL_SECONDS)
    interval = float(rules.checkpoint_window_seconds)
    if declared is not None and 0 < declared < interval:
        interval = declared
    if last is not None and last <= warned_at:
        due = last + interval * max(1, math.ceil((warned_at - last) / interval))
    else:
        due = warned_at + interval
    due = min(due, warned_at + interval)
    end = due + rules.checkpoint_slack_seconds
    return max(deadline, end), (
        f"its next checkpoint is due by {int(due)} (every {int(interval)}s), "
        f"{rules.checkpoint_slack_seconds}s allowed to write it"
    )


def _running(pod: Pod) -> bool:
    return pod.phase == "Running" and bool(pod.node_name) and not pod.deleting


def _gang_age(pods: list[Pod], now: float) -> dict[tuple[str, str], float]:
    ages: dict[tuple[str, str], float] = {}
    for pod in pods:
        gang = gang_of(pod)
        if gang is not None and _running(pod) and pod.started is not None:
            ages[gang] = max(ages.get(gang, 0.0), now - pod.started)
    return ages


def judge(
    pod: Pod,
    fleet: FleetView,
    owners: dict[OwnerKey, OwnerFacts],
    now: float,
    rules: LifetimeRules,
    gang_age: float | None = None,
) -> RuntimeJudgement:
    if not _running(pod):
        return RuntimeJudgement(pod=pod, verdict=Verdict.NOT_RUNNING, reason=f"phase {pod.phase}")
    if pod.exempt:
        return RuntimeJudgement(
            pod=pod, verdict=Verdict.EXEMPT, reason=f"labelled {keys.EXEMPT}=true"
        )
    workload_type = fleet.workload_types.get(pod.workload_type or "")
    limit = workload_type.default_max_runtime_seconds if workload_type else None
    if limit is None or limit <= 0:
        why = (
            f"workload type {pod.workload_type} has no maximum runtime"
            if workload_type
            else f"no known {keys.WORKLOAD_TYPE} label ({pod.workload_type!r})"
        )
        return RuntimeJudgement(pod=pod, verdict=Verdict.UNBOUNDED, reason=why)
    if pod.active_deadline_seconds is not None:
        return RuntimeJudgement(
            pod=pod,
            verdict=Verdict.OWN_DEADLINE,
            reason=f"its activeDeadlineSeconds ({pod.active_deadline_seconds}s) bounds it; "
            "the kubelet enforces it",
        )
    key = owner_key(pod)
    if key is not None and key.api_version == "batch/v1" and key.kind == "Job":
        facts = owners.get(key)
        if facts is None:
            return RuntimeJudgement(
                pod=pod,
                verdict=Verdict.NO_EVIDENCE,
                reason=f"its {key} could not be read: whether it bounds its own runtime is unknown",
            )
        if facts.active_deadline_seconds is not None:
            return RuntimeJudgement(
                pod=pod,
                verdict=Verdict.OWN_DEADLINE,
                reason=f"its Job's activeDeadlineSeconds ({facts.active_deadline_seconds}s) "
                "bounds it; the Job controller enforces it",
            )
    if pod.started is None:
        return RuntimeJudgement(pod=pod, verdict=Verdict.NO_EVIDENCE, reason="no start time")
    running = max(now - pod.started, gang_age or 0.0)
    oldest = " (its gang's oldest member)" if gang_age and gang_age > now - pod.started else ""
    facts_kw: dict[str, Any] = {"running_seconds": running, "max_runtime_seconds": limit}
    if running <= limit:
        return RuntimeJudgement(
            pod=pod,
            verdict=Verdict.WITHIN,
            reason=f"running {running:.0f}s{oldest}, maximum {limit}s",
            **facts_kw,
        )
    past = f"running {running:.0f}s{oldest}, past the {limit}s maximum of {pod.workload_type}"
    warned_at = annotation_number(pod, keys.RUNTIME_WARNED_AT)
    if warned_at is None or warned_at > now:
        stop_at, why = stop_time(pod, now, rules)
        return RuntimeJudgement(
            pod=pod,
            verdict=Verdict.WARN,
            reason=f"{past}; stops at {int(stop_at)}: {why}",
            warned_at=None,
            stop_at=stop_at,
            deadline=now + rules.stop_grace_seconds,
            **facts_kw,
        )
    stop_at, why = stop_time(pod, warned_at, rules)
    if now < stop_at:
        return RuntimeJudgement(
            pod=pod,
            verdict=Verdict.WAITING,
            reason=f"{past}; warned, stops in {stop_at - now:.0f}s: {why}",
            warned_at=warned_at,
            stop_at=stop_at,
            **facts_kw,
        )
    return RuntimeJudgement(
        pod=pod,
        verdict=Verdict.STOP,
        reason=f"{past}; warned {now - warned_at:.0f}s ago, {why}",
        warned_at=warned_at,
        stop_at=stop_at,
        **facts_kw,
    )


def plan_runtime(
    pods: list[Pod],
    fleet: FleetView,
    owners: dict[OwnerKey, OwnerFacts],
    now: float,
    rules: LifetimeRules,
) -> RuntimePlan:
    """Judge every pod; group the pods due for a stop by the workload (and gang) they belong to."""
    plan = RuntimePlan()
    ages = _gang_age(pods, now)
    judged: list[RuntimeJudgement] = []
    for pod in pods:
        gang = gang_of(pod)
        judgement = judge(pod, fleet, owners, now, rules, ages.get(gang) if gang else None)
        plan.judgements.append(judgement)
        if judgement.verdict is Verdict.WARN:
            plan.warn.append(judgement)
        if not pod.terminal:
            judged.append(judgement)
    if not any(j.verdict is Verdict.STOP for j in judged):
        return plan
    members: dict[str, list[RuntimeJudgement]] = {}
    targets: dict[str, Target] = {}
    not_due: dict[tuple[str, str], list[RuntimeJudgement]] = {}
    for judgement in judged:
        target = reclaim_target(judgement.pod)
        targets[target.key] = target
        members.setdefault(target.key, []).append(judgement)
        gang = gang_of(judgement.pod)
        if gang is not None and judgement.verdict is not Verdict.STOP:
            not_due.setdefault(gang, []).append(judgement)
    for key, judgements in sorted(members.items()):
        due = [j for j in judgements if j.verdict is Verdict.STOP]
        if not due:
            continue
        target = targets[key]
        others = [j for j in judgements if j.verdict is not Verdict.STOP] + [
            j
            for gang in {gang_of(d.pod) for d in due} - {None}
            for j in not_due.get(gang or ("", ""), [])
            if j not in judgements
        ]
        if others:
            group = due[0].pod.annotations.get(GANG_ANNOTATION)
            plan.held.append(
                (
                    target,
                    "pods of the workload"
                    + (f" or of its gang (PodGroup {group})" if group else "")
                    + " are not due for a stop: "
                    + ", ".join(f"{j.pod.key} ({j.verdict.value})" for j in others[:10])
                    + "; a workload and its gang are stopped whole",
                )
            )
        elif target.method == "unsupported":
            plan.held.append((target, f"owner kind {target.kind} cannot be stopped safely"))
        else:
            plan.stop.append(StopPlan(target=target, pods=tuple(due)))
    return plan
