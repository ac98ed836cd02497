"""Orphaned and failed work that still holds accelerators: mark, wait the grace, reclaim.

A pod on a node, not terminated and not already being deleted, is orphaned when the owner it
names (or the Job that let go of it, `observe.owners.owner_key`) was read and:

- does not exist, or exists under the name with another uid (deleted and created again):
  `owner-gone`;
- is a batch Job with condition Failed=True, or a Volcano Job in phase Failed: `job-failed`
  (a failed Job starts nothing again; its pods that still run hold accelerators for nothing).

An owner that could not be read, an owner kind that is not looked up, and a bare pod are never
orphans: missing evidence is no reason to act. Exempt pods are left alone.

The state is on the pod (`fleetplane.dev/orphan-found-at`): found and not marked → MARK (with a
Warning Event); marked, before `orphan_grace_seconds` → WAITING; after it → RECLAIM (the pod is
deleted, OPA's `orphan-reclaim` has the last word, and act reads the owner again first). A marked
pod whose owner is back and healthy → CLEAR.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from controller.config import LifetimeRules
from controller.decide.workloads import annotation_number, verdict_counts
from controller.observe.model import Pod
from controller.observe.owners import OwnerFacts, OwnerKey, owner_key
from fleet import labels as keys


class Verdict(StrEnum):
    NOT_HOLDING = "not-holding"
    EXEMPT = "exempt"
    NOT_OWNED = "not-owned"
    NO_EVIDENCE = "no-evidence"
    OWNED = "owned"
    MARK = "mark"
    WAITING = "waiting"
    RECLAIM = "reclaim"
    CLEAR = "clear"


@dataclass(frozen=True, slots=True, kw_only=True)
class OrphanJudgement:
    pod: Pod
    verdict: Verdict
    reason: str
    owner: OwnerKey | None = None
    orphan: str | None = None
    """`owner-gone` or `job-failed` when orphaned."""
    found_at: float | None = None

    @property
    def warned_at(self) -> float | None:
        return self.found_at

    def opa_input(self, now: float) -> dict[str, Any]:
        """The lifetime decision's input for an `orphan-reclaim` (docs/contracts.md)."""
        return {
            "action": "orphan-reclaim",
            "pod": self.pod.manifest(),
            "now": int(now),
            "orphan": {
                "reason": self.orphan,
                "owner": str(self.owner) if self.owner else None,
                "found_at": None if self.found_at is None else int(self.found_at),
            },
        }


@dataclass(kw_only=True)
class OrphanPlan:
    judgements: list[OrphanJudgement] = field(default_factory=list)
    mark: list[OrphanJudgement] = field(default_factory=list)
    clear: list[OrphanJudgement] = field(default_factory=list)
    reclaim: list[OrphanJudgement] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return verdict_counts(self.judgements)


def orphan_reason(key: OwnerKey, facts: OwnerFacts) -> tuple[str, str] | None:
    """(`owner-gone` | `job-failed`, why) when the facts make the pod an orphan, else None."""
    if not facts.exists:
        if facts.found_uid:
            return "owner-gone", (
                f"its {key} was deleted and created again (uid {facts.found_uid}, "
                f"the pod names {key.uid})"
            )
        return "owner-gone", f"its {key} no longer exists"
    if facts.failed:
        return "job-failed", f"its {key} failed ({facts.failed_reason})"
    return None


def judge(
    pod: Pod, owners: dict[OwnerKey, OwnerFacts], now: float, rules: LifetimeRules
) -> OrphanJudgement:
    if pod.terminal or not pod.node_name or pod.deleting:
        return OrphanJudgement(
            pod=pod, verdict=Verdict.NOT_HOLDING, reason=f"phase {pod.phase}, holds nothing"
        )
    if pod.exempt:
        return OrphanJudgement(pod=pod, verdict=Verdict.EXEMPT, reason=f"{keys.EXEMPT}=true")
    key = owner_key(pod)
    if key is None:
        return OrphanJudgement(
            pod=pod, verdict=Verdict.NOT_OWNED, reason="a bare pod or an owner kind not looked up"
        )
    found_at = annotation_number(pod, keys.ORPHAN_FOUND_AT)
    facts = owners.get(key)
    if facts is None:
        return OrphanJudgement(
            pod=pod,
            verdict=Verdict.NO_EVIDENCE,
            reason=f"its {key} could not be read",
            owner=key,
            found_at=found_at,
        )
    orphaned = orphan_reason(key, facts)
    if orphaned is None:
        verdict = Verdict.CLEAR if found_at is not None else Verdict.OWNED
        return OrphanJudgement(
            pod=pod, verdict=verdict, reason=f"its {key} exists", owner=key, found_at=found_at
        )
    orphan, why = orphaned
    common: dict[str, Any] = {"pod": pod, "owner": key, "orphan": orphan}
    if found_at is None or found_at > now:
        return OrphanJudgement(
            verdict=Verdict.MARK,
            reason=f"{why}; reclaimed after {rules.orphan_grace_seconds}s",
            **common,
        )
    if now < found_at + rules.orphan_grace_seconds:
        return OrphanJudgement(
            verdict=Verdict.WAITING,
            reason=f"{why}; found {now - found_at:.0f}s ago, grace {rules.orphan_grace_seconds}s",
            found_at=found_at,
            **common,
        )
    return OrphanJudgement(
        verdict=Verdict.RECLAIM,
        reason=f"{why}; found {now - found_at:.0f}s ago, grace {rules.orphan_grace_seconds}s",
        found_at=found_at,
        **common,
    )


def plan_orphans(
    pods: list[Pod], owners: dict[OwnerKey, OwnerFacts], now: float, rules: LifetimeRules
) -> OrphanPlan:
    plan = OrphanPlan()
    for pod in pods:
        judgement = judge(pod, owners, now, rules)
        plan.judgements.append(judgement)
        if judgement.verdict is Verdict.MARK:
            plan.mark.append(judgement)
        elif judgement.verdict is Verdict.CLEAR:
            plan.clear.append(judgement)
        elif judgement.verdict is Verdict.RECLAIM:
            plan.reclaim.append(judgement)
    return plan
