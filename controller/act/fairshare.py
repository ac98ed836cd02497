"""Fair share taken back: evict the planned victims through the Eviction API, each on an
explicit allow of `fleetplane/decisions/fairshare`.

For each planned reclaim (`decide.fairshare.Reclaim`: one waiting pod of a team under its
share, one node, the victims there) every victim is put to the policy before any is evicted,
each with its team's holding in the pool already reduced by the victims of the reclaim before
it (so victims of one team together cannot take it below its share). One refusal stops the
reclaim: nobody is evicted for that pod in this pass, and the next pass plans again on what it
sees then. Then, per victim and its gang mates: annotate why (the patch is made on the pod
judged, never on a pod recreated under its name), evict (policy/v1 Eviction with the uid as
precondition, so PodDisruptionBudgets hold; the grace period lets it checkpoint), record a
Warning Event `FairShareReclaimed` on the victim and `FairShareReclaimedForThis` on the waiting
pod, and count the action (`fleetplane_controller_actions_total{concern="fairshare"}`). A 429
(a disruption budget) takes the annotation back and stops the reclaim; a pod already gone
counts as freed. A victim that is an operator's pod is not evicted: its workload (its gang) is
stopped through the operator's API (`act.victim_stop`). Under --dry-run each eviction is printed and logged, nothing is written.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from controller import annotations as own
from controller.act.events import ObjectRef
from controller.act.pod_annotate import Outcome, annotate_judged_pod
from controller.act.runtime import Runtime
from controller.act.victim_stop import Stopped, operator_workload, stop_victim_workload
from controller.decide.fairshare import FairSharePlan, Reclaim, opa_input
from controller.decide.preempt import Candidate
from controller.errors import ConflictError, NotFoundError, TooManyRequestsError
from controller.observe.model import Pod, is_accelerator

CONCERN = "fairshare"


def _ref(pod: Pod) -> ObjectRef:
    return ObjectRef(
        api_version="v1", kind="Pod", namespace=pod.namespace, name=pod.name, uid=pod.uid
    )


def act_on_fair_share(rt: Runtime, plan: FairSharePlan) -> set[str]:
    """Evict the plan's victims; the uids of the pods removed (for the concerns after it)."""
    for share in plan.shares:
        rt.log.info(
            "fairshare.share",
            team=share.team,
            pool="/".join(share.pool),
            weight=share.weight,
            held=share.held,
            pending=share.pending,
            deserved=round(share.deserved, 3),
            reclaimable=share.reclaimable,
        )
    for pod, reason in plan.waiting:
        rt.log.info("fairshare.waiting", pod=pod.key, reason=reason)
    freed: set[str] = set()
    for reclaim in plan.reclaims:
        rt.guarded(
            CONCERN,
            "reclaim",
            reclaim.claimant.key,
            partial(_serve, rt, reclaim, plan.capacity.get(reclaim.pool, 0), freed),
        )
    return freed


def _devices(victim: Candidate) -> int:
    return sum(
        n for pod in (victim.pod, *victim.mates) for r, n in pod.demand.items() if is_accelerator(r)
    )


def _serve(rt: Runtime, reclaim: Reclaim, capacity: int, freed: set[str]) -> bool:
    held = dict(reclaim.victim_held)
    decisions: list[tuple[Candidate, Any]] = []
    for victim in reclaim.victims:
        team = victim.team or ""
        decision = rt.opa.decide(
            "fairshare", opa_input(reclaim, victim, held.get(team, 0), capacity, rt.now)
        )
        if not decision.allow:
            rt.log.info(
                "fairshare.victim.denied",
                claimant=reclaim.claimant.key,
                victim=victim.pod.key,
                reasons=list(decision.reasons),
            )
            rt.summary.action(CONCERN, "evict", "denied")
            return False
        held[team] = held.get(team, 0) - _devices(victim)
        decisions.append((victim, decision))
    for victim, decision in decisions:
        why = _why(reclaim, victim, decision)
        if operator_workload(victim) is not None:
            # The operator's workload is the gang: stopped through its own API, not evicted.
            stopped = stop_victim_workload(
                rt, CONCERN, victim, why, event_reason="FairShareReclaimed", node=reclaim.node
            )
            if stopped is Stopped.REFUSED:
                return False
            if not rt.dry_run:
                freed.update(pod.uid for pod in (victim.pod, *victim.mates))
            continue
        if rt.dry_run:
            rt.would(CONCERN, "evict", victim.pod.key, why, node=reclaim.node)
            for mate in victim.mates:
                rt.would(CONCERN, "evict", mate.key, f"gang of {victim.pod.key}", node=reclaim.node)
            continue
        if not _evict(rt, reclaim, victim.pod, why, freed):
            rt.log.warning(
                "fairshare.partial",
                claimant=reclaim.claimant.key,
                node=reclaim.node,
                reason="a disruption budget keeps a victim; the next pass plans again",
            )
            return False
        for mate in victim.mates:
            _evict(rt, reclaim, mate, f"gang of {victim.pod.key}: {why}", freed)
    if not rt.dry_run:
        rt.events.emit(
            _ref(reclaim.claimant),
            "FairShareReclaimedForThis",
            f"took back {', '.join(v.pod.key for v in reclaim.victims)} on {reclaim.node}: team "
            f"{reclaim.team} holds {reclaim.held} of its deserved {reclaim.deserved:.1f} "
            f"{reclaim.pool[0]} ({reclaim.pool[1] or 'any model'})",
        )
    return True


def _why(reclaim: Reclaim, victim: Candidate, decision: Any) -> str:
    team = victim.team or ""
    policy = f"; policy: {decision.because()}" if decision else ""
    return (
        f"fair share: team {reclaim.team} holds {reclaim.held} of its deserved "
        f"{reclaim.deserved:.1f} {reclaim.pool[0]} ({reclaim.pool[1] or 'any model'}) and "
        f"{reclaim.claimant.key} waits {reclaim.pending_seconds:.0f}s; team {team} holds "
        f"{reclaim.victim_held.get(team, 0)} of its deserved "
        f"{reclaim.deserved_of.get(team, 0.0):.1f}; this pod had the least work to lose: "
        f"{victim.seconds_since_checkpoint:.0f}s since its last checkpoint, {_devices(victim)} "
        f"device(s){policy}"
    )


def _evict(rt: Runtime, reclaim: Reclaim, pod: Pod, why: str, freed: set[str]) -> bool:
    """True when the pod is gone (evicted now, or gone already); False when a disruption
    budget keeps it."""
    note: dict[str, str | None] = {
        own.PREEMPTED_BY: reclaim.claimant.key,
        own.PREEMPTED_AT: str(int(rt.now)),
        own.PREEMPTION_REASON: why[:1000],
    }
    annotated = annotate_judged_pod(rt, pod, note)
    if annotated.outcome in (Outcome.GONE, Outcome.REPLACED):
        rt.log.info("fairshare.evict.gone", victim=pod.key, reason=annotated.outcome.value)
        rt.summary.action(CONCERN, "evict", "gone")
        freed.add(pod.uid)
        return True
    try:
        rt.kube.evict(
            pod.namespace, pod.name, uid=pod.uid, grace_seconds=rt.settings.eviction_grace_seconds
        )
    except TooManyRequestsError as error:
        rt.log.info("fairshare.evict.blocked", victim=pod.key, reason=f"disruption budget: {error}")
        rt.summary.action(CONCERN, "evict", "blocked")
        annotate_judged_pod(rt, pod, dict.fromkeys(note))
        return False
    except (NotFoundError, ConflictError) as error:
        rt.log.info("fairshare.evict.gone", victim=pod.key, reason=str(error))
        rt.summary.action(CONCERN, "evict", "gone")
        freed.add(pod.uid)
        return True
    freed.add(pod.uid)
    rt.events.emit(_ref(pod), "FairShareReclaimed", why, warning=True)
    rt.done(CONCERN, "evict", pod.key, why, claimant=reclaim.claimant.key, node=reclaim.node)
    return True
