"""Which accelerator workloads are idle: warn, clear a warning, or reclaim.

Per pod (`judge_pod`), in this order; the first that applies is the verdict:

1. not running (pending, terminating, finished)          → NOT_RUNNING, nothing to do
2. labelled `fleetplane.dev/exempt=true`                 → EXEMPT
3. no workload type, an unknown one, or `idle: null`     → NOT_RECLAIMABLE
4. running for less than the window                      → NO_EVIDENCE: no action, warning kept
5. utilisation of a GPU on the pod's node above the
   idle line in the window (`busy_by_utilisation`)       → BUSY; a warning is cleared
6. evidence missing or partial (`summarise_evidence`)    → NO_EVIDENCE: no action, warning kept
7. any other signal above the idle line in the window    → BUSY; a warning is cleared
8. idle, and not warned inside the current window        → WARN (warned-at = now,
                                                           deadline = now + grace)
9. idle, warned, deadline not reached                    → WAITING
10. idle, warned inside the window, deadline reached     → RECLAIM (OPA has the last word)

Per workload (`plan_idle`): the pods of one owner (Deployment, StatefulSet, Job, Volcano Job,
or a bare pod) are reclaimed together, and only when every non-terminal accelerator pod of it is
RECLAIM; one busy replica keeps the whole workload, and so does one that is not running (pending,
terminating): it was not judged, and scaling its owner to zero would kill it on the evidence
of the others.

Utilisation above the line is positive evidence of work, so it decides before completeness: one
sample over the threshold proves the pod busy even when other samples are missing. That is also
what lets `observe.metrics` read the full evidence only for pods that may be idle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from controller.config import FleetView, IdleRule, WorkloadType
from controller.decide.workloads import (
    GANG_ANNOTATION,
    Target,
    annotation_number,
    gang_of,
    reclaim_target,
    verdict_counts,
)
from controller.observe.metrics import PodEvidence
from controller.observe.model import Pod
from controller.views import view
from fleet import labels as keys


class Verdict(StrEnum):
    NOT_RUNNING = "not-running"
    EXEMPT = "exempt"
    NOT_RECLAIMABLE = "not-reclaimable"
    NO_EVIDENCE = "no-evidence"
    BUSY = "busy"
    WARN = "warn"
    WAITING = "waiting"
    RECLAIM = "reclaim"


_BUSY = Verdict.BUSY  # the verdict of most pods, looked up once


@dataclass(frozen=True, slots=True, kw_only=True)
class EvidenceRules:
    """How evidence is judged complete and idle (see `Settings`)."""

    scrape_interval_seconds: float = 15.0
    min_sample_coverage: float = 0.95
    fb_steady_mib: float = 256.0

    def expected_samples(self, window_seconds: int) -> int:
        return max(
            1, math.ceil(window_seconds / self.scrape_interval_seconds * self.min_sample_coverage)
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class IdleFacts:
    """The evidence over one window, reduced over the pod's GPUs (the worst case of each)."""

    window_seconds: int
    gpus: int
    samples: int
    expected_samples: int
    max_util_percent: float
    max_engine_active: float | None
    max_fb_used_mib: float | None
    fb_swing_mib: float

    def opa_input(self, *, warned_at: float | None, now: float) -> dict[str, Any]:
        """The `idle` object of the reclaim decision input (docs/contracts.md)."""
        return {
            "window_seconds": self.window_seconds,
            "samples": self.samples,
            "expected_samples": self.expected_samples,
            "max_util_percent": self.max_util_percent,
            "max_engine_active": self.max_engine_active,
            "max_fb_used_mib": self.max_fb_used_mib,
            "warned_at": None if warned_at is None else int(warned_at),
            "now": int(now),
        }


@view
class PodJudgement:
    pod: Pod
    verdict: Verdict
    reason: str
    rule: IdleRule | None = None
    facts: IdleFacts | None = None
    warned_at: float | None = None
    deadline: float | None = None

    @property
    def warned(self) -> bool:
        return self.warned_at is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReclaimPlan:
    target: Target
    pods: tuple[PodJudgement, ...]


@dataclass(kw_only=True)
class IdlePlan:
    judgements: list[PodJudgement] = field(default_factory=list)
    warn: list[PodJudgement] = field(default_factory=list)
    clear: list[PodJudgement] = field(default_factory=list)
    reclaim: list[ReclaimPlan] = field(default_factory=list)
    held: list[tuple[Target, str]] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return verdict_counts(self.judgements)


def summarise_evidence(
    pod: Pod, evidence: PodEvidence | None, rule: IdleRule, rules: EvidenceRules
) -> tuple[IdleFacts | None, str]:
    """Facts when the evidence covers every GPU of the pod for the whole window, else None and
    what is missing. Series from another node (a previous pod of the same name) are ignored."""
    gpus_held = sum(n for r, n in pod.demand.items() if r.startswith("nvidia.com/"))
    if gpus_held == 0:
        return None, "no DCGM metrics for this accelerator (not a GPU)"
    if evidence is None:
        return None, "no DCGM series for the pod"
    series = [s for s in evidence.gpus.values() if not s.hostname or s.hostname == pod.node_name]
    if len(series) < gpus_held:
        return None, f"DCGM series for {len(series)} of the pod's {gpus_held} GPUs"
    if not evidence.detailed:
        # Only the peak utilisation was read for this pod (observe.metrics): enough to prove it
        # busy, never enough to call it idle.
        return None, "only the peak utilisation was read for this pod"
    expected = rules.expected_samples(rule.window_seconds)
    fewest = min(min(s.util_samples, s.fb_samples) for s in series)
    if fewest < expected:
        return None, (
            f"partial metrics: {fewest} samples in the {rule.window_seconds}s window, "
            f"{expected} expected"
        )
    engines = [s.max_engine_active for s in series if s.max_engine_active is not None]
    fb_max = [s.max_fb_used_mib for s in series if s.max_fb_used_mib is not None]
    swings = [
        s.max_fb_used_mib - s.min_fb_used_mib
        for s in series
        if s.max_fb_used_mib is not None and s.min_fb_used_mib is not None
    ]
    return (
        IdleFacts(
            window_seconds=rule.window_seconds,
            gpus=len(series),
            samples=fewest,
            expected_samples=expected,
            max_util_percent=max(s.max_util_percent for s in series),
            max_engine_active=max(engines) if engines else None,
            max_fb_used_mib=max(fb_max) if fb_max else None,
            fb_swing_mib=max(swings) if swings else 0.0,
        ),
        "complete",
    )


def busy_by_utilisation(pod: Pod, evidence: PodEvidence | None, rule: IdleRule) -> str | None:
    """Why the pod is busy when a GPU series on its node shows utilisation above the idle line
    in the window, whether or not the evidence is complete; None otherwise."""
    if evidence is None:
        return None
    node = pod.node_name
    line = rule.util_threshold_percent
    peak = None
    for series in evidence.gpus.values():
        if (not series.hostname or series.hostname == node) and (
            peak is None or series.max_util_percent > peak
        ):
            peak = series.max_util_percent
    if peak is not None and peak > line:
        return f"GPU utilisation reached {peak:g}% (idle threshold {line:g}%)"
    return None


def busy_signal(facts: IdleFacts, rule: IdleRule, rules: EvidenceRules) -> str | None:
    """Why the pod counts as busy, or None when every signal stayed on the idle side."""
    if facts.max_util_percent > rule.util_threshold_percent:
        return (
            f"GPU utilisation reached {facts.max_util_percent:g}% "
            f"(idle threshold {rule.util_threshold_percent:g}%)"
        )
    if (
        facts.max_engine_active is not None
        and facts.max_engine_active * 100 > rule.util_threshold_percent
    ):
        return (
            f"graphics engine activity reached {facts.max_engine_active * 100:g}% "
            f"(idle threshold {rule.util_threshold_percent:g}%)"
        )
    if facts.fb_swing_mib > rules.fb_steady_mib:
        return (
            f"GPU memory use moved by {facts.fb_swing_mib:g} MiB in the window "
            f"(more than {rules.fb_steady_mib:g} MiB: data is being loaded or freed)"
        )
    return None


def _running(pod: Pod) -> bool:
    return pod.phase == "Running" and bool(pod.node_name) and not pod.deleting


def judge_pod(
    pod: Pod,
    fleet: FleetView,
    evidence: PodEvidence | None,
    now: float,
    rules: EvidenceRules,
) -> PodJudgement:
    if not _running(pod):
        return PodJudgement(pod=pod, verdict=Verdict.NOT_RUNNING, reason=f"phase {pod.phase}")
    return _judge_running(
        pod, fleet.workload_types.get(pod.workload_type or ""), evidence, now, rules
    )


def _judge_running(
    pod: Pod,
    wt: WorkloadType | None,
    evidence: PodEvidence | None,
    now: float,
    rules: EvidenceRules,
) -> PodJudgement:
    """`judge_pod` of a running pod whose workload type (`wt`) was looked up by the caller."""
    warned_at = annotation_number(pod, keys.IDLE_WARNED_AT)
    deadline = annotation_number(pod, keys.RECLAIM_DEADLINE)
    verdict, reason, rule, facts = _verdict(pod, wt, evidence, now, rules, warned_at, deadline)
    return PodJudgement(
        pod=pod,
        verdict=verdict,
        reason=reason,
        rule=rule,
        facts=facts,
        warned_at=warned_at,
        deadline=deadline,
    )


def _verdict(
    pod: Pod,
    wt: WorkloadType | None,
    evidence: PodEvidence | None,
    now: float,
    rules: EvidenceRules,
    warned_at: float | None,
    deadline: float | None,
) -> tuple[Verdict, str, IdleRule | None, IdleFacts | None]:
    """The steps of the module doc for a running pod: verdict, reason, the idle rule applied
    and the facts judged (None where a step decides before them)."""
    if pod.exempt:
        return Verdict.EXEMPT, f"labelled {keys.EXEMPT}=true", None, None
    if wt is None or wt.idle is None:
        reason = (
            f"workload type {pod.workload_type} has no idle rule"
            if wt is not None
            else f"no known {keys.WORKLOAD_TYPE} label ({pod.workload_type!r})"
        )
        return Verdict.NOT_RECLAIMABLE, reason, None, None
    rule = wt.idle
    running_for = now - (pod.started if pod.started is not None else now)
    if running_for < rule.window_seconds:
        return (
            Verdict.NO_EVIDENCE,
            f"running for {running_for:.0f}s, less than the {rule.window_seconds}s window",
            rule,
            None,
        )
    busy = busy_by_utilisation(pod, evidence, rule)
    if busy is not None:
        return _BUSY, busy, rule, None  # most pods of a fleet end here
    facts, missing = summarise_evidence(pod, evidence, rule, rules)
    if facts is None:
        return Verdict.NO_EVIDENCE, missing, rule, None
    busy = busy_signal(facts, rule, rules)
    if busy is not None:
        return Verdict.BUSY, busy, rule, facts
    idle_for = (
        f"idle for the whole {rule.window_seconds}s window: peak utilisation "
        f"{facts.max_util_percent:g}% (threshold {rule.util_threshold_percent:g}%), "
        f"{facts.samples}/{facts.expected_samples} samples on {facts.gpus} GPU(s)"
    )
    if warned_at is None or not (now - rule.window_seconds <= warned_at <= now):
        again = "" if warned_at is None else " (the previous warning is outside the window)"
        return (
            Verdict.WARN,
            f"{idle_for}; reclaimable after {rule.grace_seconds}s{again}",
            rule,
            facts,
        )
    effective_deadline = deadline if deadline is not None else warned_at + rule.grace_seconds
    if now < effective_deadline:
        return (
            Verdict.WAITING,
            f"{idle_for}; warned, reclaimable in {effective_deadline - now:.0f}s",
            rule,
            facts,
        )
    return (
        Verdict.RECLAIM,
        f"{idle_for}; warned {now - warned_at:.0f}s ago, grace {rule.grace_seconds}s",
        rule,
        facts,
    )


def plan_idle(
    pods: list[Pod],
    fleet: FleetView,
    evidence: dict[int, dict[tuple[str, str], PodEvidence]],
    now: float,
    rules: EvidenceRules,
) -> IdlePlan:
    """Judge every pod; group reclaim candidates by the workload that owns them."""
    plan = IdlePlan()
    judged: list[PodJudgement] = []
    types = fleet.workload_types
    no_evidence: dict[tuple[str, str], PodEvidence] = {}
    for pod in pods:
        if not _running(pod):  # judged without evidence
            judgement = PodJudgement(
                pod=pod, verdict=Verdict.NOT_RUNNING, reason=f"phase {pod.phase}"
            )
            plan.judgements.append(judgement)
            if not pod.terminal:
                # Pending or terminating: still part of its workload, which a reclaim would
                # stop with it, so it keeps the workload (see below).
                judged.append(judgement)
            continue
        wt = types.get(pod.workload_type or "")
        found = (
            evidence.get(wt.idle.window_seconds, no_evidence).get((pod.namespace, pod.name))
            if wt is not None and wt.idle is not None
            else None
        )
        judgement = _judge_running(pod, wt, found, now, rules)
        plan.judgements.append(judgement)
        verdict = judgement.verdict
        if verdict is _BUSY:
            if judgement.warned_at is not None:
                plan.clear.append(judgement)
        elif verdict is Verdict.WARN:
            plan.warn.append(judgement)
        judged.append(judgement)
    if not any(j.verdict == Verdict.RECLAIM for j in judged):
        return plan  # no workload has a pod to reclaim: nothing to group
    members: dict[str, list[PodJudgement]] = {}
    targets: dict[str, Target] = {}
    for judgement in judged:
        target = reclaim_target(judgement.pod)
        targets[target.key] = target
        members.setdefault(target.key, []).append(judgement)
    # A gang (one Volcano PodGroup) is judged whole, whichever objects own its pods: one pod
    # not idle keeps every workload of the gang.
    not_idle: dict[tuple[str, str], list[PodJudgement]] = {}
    for judgement in judged:
        gang = gang_of(judgement.pod)
        if gang is not None and judgement.verdict != Verdict.RECLAIM:
            not_idle.setdefault(gang, []).append(judgement)
    for key, judgements in sorted(members.items()):
        ready = [j for j in judgements if j.verdict == Verdict.RECLAIM]
        if not ready:
            continue
        target = targets[key]
        busy_mates = [
            j
            for r in ready
            for j in not_idle.get(gang_of(r.pod) or ("", ""), [])
            if j not in judgements
        ]
        if busy_mates:
            plan.held.append(
                (
                    target,
                    f"its gang (PodGroup {ready[0].pod.annotations.get(GANG_ANNOTATION)}) has pods "
                    "that were not judged idle: "
                    + ", ".join(f"{j.pod.key} ({j.verdict.value})" for j in busy_mates)
                    + "; a gang is reclaimed only when all its pods are idle",
                )
            )
        elif len(ready) < len(judgements):
            others = ", ".join(
                f"{j.pod.key} ({j.verdict.value})"
                for j in judgements
                if j.verdict != Verdict.RECLAIM
            )
            plan.held.append(
                (
                    target,
                    f"workload has pods that were not judged idle: {others}; "
                    f"{len(ready)} of {len(judgements)} accelerator pods are reclaimable, "
                    "the workload is reclaimed only when all are",
                )
            )
        elif target.method == "unsupported":
            plan.held.append((target, f"owner kind {target.kind} cannot be reclaimed safely"))
        else:
            plan.reclaim.append(ReclaimPlan(target=target, pods=tuple(ready)))
    return plan
