"""Preemption: evict the planned victims through the Eviction API, each on an explicit allow.

For each planned preemption, on its best node first: ask `fleetplane/decisions/preempt` for
every victim of the selection before evicting any, one victim at a time with its team's usage
already reduced by the victims of the selection before it (so victims of one team together
cannot take it below its guarantee; an answer is reused only for the same usage), and a denied
victim is replaced by the next one in comparator order (`decide.preempt.select_victims`). A
team's usage leaves out its pods terminating or freed by this pass. Then, per victim: annotate
why (the patch names the pod's uid), evict (policy/v1 Eviction with the uid as precondition, so
PodDisruptionBudgets hold and a pod recreated under the same name is never evicted unjudged;
the grace period lets it checkpoint), and record an Event on the victim and on the preemptor.
A pod gone or replaced meanwhile is logged and not evicted. A 429 means a PodDisruptionBudget
forbids that eviction now: the annotation is taken back, the victim is excluded and the
selection is made again from the remaining candidates; when no selection is left the
preemption stops and waits for a later pass. Any other eviction failure takes the annotation
back too and fails the preemption. The next node is tried only while nothing was evicted for
this preemptor, so victims are never taken on two nodes.

A victim that is an operator's pod (a TrainJob's, JobSet's, RayJob's, RayCluster's or
LeaderWorkerSet's) is not evicted: its whole workload, taken as one gang by the decide step, is
stopped through the operator's API (`act.victim_stop`, the stop idle reclaim uses), with the
Event `Preempted` on the top object and its pods; under --dry-run the line names the top.

A pending gang's plan spans nodes (`decide.preempt.GangPlan`): every victim of it is judged
before any is evicted (`_serve_gang`); a refused one sends the gang back to the planner, and
a gang with no plan left, like one the planner could not serve, evicts nobody and gets a
Warning Event `GangPreemptionWaits` on its PodGroup.
"""

from __future__ import annotations

import contextlib
from functools import partial
from typing import Any

from controller import annotations as own
from controller.act.events import ObjectRef
from controller.act.runtime import Runtime
from controller.act.victim_stop import Stopped, operator_workload, stop_victim_workload
from controller.act.writes import patch_fresh
from controller.decide.preempt import (
    AnswerKey,
    Candidate,
    GangPlan,
    NodeOption,
    Preemption,
    PreemptPlan,
    Quota,
    asked_usages,
    opa_input,
    release,
    select_victims,
)
from controller.decide.workloads import team_usage
from controller.errors import (
    ConflictError,
    ControllerError,
    NotFoundError,
    PermanentError,
    TooManyRequestsError,
)
from controller.nodeflow import lock
from controller.observe.kube import pod_path
from controller.observe.model import Pod

CONCERN = "preempt"


def _ref(pod: Pod) -> ObjectRef:
    return ObjectRef(
        api_version="v1", kind="Pod", namespace=pod.namespace, name=pod.name, uid=pod.uid
    )


def act_on_preemption(
    rt: Runtime, plan: PreemptPlan, pods: list[Pod], freeing: frozenset[str] = frozenset()
) -> None:
    """`freeing`: uids of pods this pass already removes (as given to the plan)."""
    rt.summary.set("preemptors", len(plan.preemptions), state="planned")
    rt.summary.set("preemptors", len(plan.waiting), state="waiting")
    rt.summary.set("preemptors", len(plan.unserved_gangs), state="gang-no-room")
    for pod, reason in plan.waiting:
        rt.log.info("preempt.waiting", pod=pod.key, reason=reason)
    for gang in plan.unserved_gangs:
        _gang_waits(rt, gang.namespace, gang.name, gang.reason)
    if not plan.preemptions:
        return
    usage = team_usage(pods, rt.fleet, freeing=freeing)
    for preemption in plan.preemptions:
        serve = _serve_gang if preemption.gang is not None else _serve
        rt.guarded(
            CONCERN,
            "preempt",
            preemption.preemptor.key,
            partial(serve, rt, preemption, usage),
        )


def _gang_waits(rt: Runtime, namespace: str, name: str, reason: str) -> None:
    """Nobody is evicted for a gang that cannot have room for all its pods at once: say so in
    the log and on its PodGroup, where `kubectl describe podgroup` shows it."""
    rt.log.warning("preempt.gang.no-room", gang=f"{namespace}/{name}", reason=reason)
    rt.events.emit(
        ObjectRef(
            api_version="scheduling.volcano.sh/v1beta1",
            kind="PodGroup",
            namespace=namespace,
            name=name,
        ),
        "GangPreemptionWaits",
        reason,
        warning=True,
    )


def _serve_gang(rt: Runtime, preemption: Preemption, usage: dict[str, dict[str, int]]) -> bool:
    """Every victim of the gang's plan, across its nodes, is put to the policy before any is
    evicted, each with its team's usage once the victims before it are gone. A refused victim
    sends the gang back to the planner without it (same snapshot); when no plan is left,
    nobody is evicted. Then the victims are evicted in order; one a disruption budget keeps
    (429) stops the rest, and the next pass, counting the evicted ones as free, plans what is
    still missing."""
    gang, replan = preemption.gang, preemption.replan
    assert gang is not None and replan is not None
    refused: set[str] = set()
    answers: dict[tuple[str, AnswerKey], Any] = {}
    while True:
        pairs = gang.victims
        quota = Quota.of(rt.fleet, usage, preemption.team)
        asked = asked_usages([victim for _, victim in pairs], quota)
        decisions: dict[str, Any] = {}
        denied = False
        for (placement, _), (victim, held, key) in zip(pairs, asked, strict=True):
            view = preemption.for_placement(placement)
            cached = (placement.pod.uid, key)
            decision = answers.get(cached)
            if decision is None:
                decision = rt.opa.decide("preempt", opa_input(view, victim, rt.fleet, held, rt.now))
                answers[cached] = decision
            decisions[victim.pod.uid] = decision
            if not decision.allow:
                rt.log.info(
                    "preempt.victim.denied",
                    preemptor=placement.pod.key,
                    gang=gang.key,
                    victim=victim.pod.key,
                    reasons=list(decision.reasons),
                )
                rt.summary.action(CONCERN, "evict", "denied")
                refused.add(victim.pod.uid)
                denied = True
                break
        if denied:
            replanned, why = replan(frozenset(refused))
            if replanned is None:
                _gang_waits(rt, gang.namespace, gang.name, f"{why} (the policy refused victims)")
                rt.summary.action(CONCERN, "preempt", "denied")
                return False
            gang = replanned
            continue
        break
    nodes = sorted({placement.option.node for placement, _ in gang.victims})
    busy = lock.take_all(rt, CONCERN, nodes, lock.PREEMPTION)
    if busy is not None:
        _gang_waits(rt, gang.namespace, gang.name, f"a node is not free to disrupt: {busy}")
        rt.summary.action(CONCERN, "preempt", "blocked")
        return False
    try:
        return _evict_gang(rt, preemption, gang, decisions, usage)
    finally:
        for node in nodes:
            lock.release(rt, CONCERN, node, lock.PREEMPTION)


def _evict_gang(
    rt: Runtime,
    preemption: Preemption,
    gang: GangPlan,
    decisions: dict[str, Any],
    usage: dict[str, dict[str, int]],
) -> bool:
    for placement, victim in gang.victims:
        view = preemption.for_placement(placement)
        decision = decisions.get(victim.pod.uid)
        if rt.dry_run:
            _would_take(rt, view, placement.option, victim, decision, f"gang {gang.key}: ")
            continue
        if not _take(rt, view, placement.option, victim, decision):
            rt.log.warning(
                "preempt.partial",
                preemptor=placement.pod.key,
                gang=gang.key,
                node=placement.option.node,
                reason="a disruption budget keeps a victim; the next pass plans what is missing",
            )
            rt.summary.action(CONCERN, "preempt", "blocked")
            return False
        release(usage, victim)
    if rt.dry_run:
        return True
    for placement in gang.placements:
        if placement.option.victims:
            _record_preemptor(
                rt,
                preemption.for_placement(placement),
                placement.option,
                list(placement.option.victims),
            )
    rt.log.info(
        "preempt.gang.served",
        gang=gang.key,
        min_member=gang.min_member,
        running=gang.running,
        placements={p.pod.key: p.option.node for p in gang.placements},
    )
    return True


Answers = dict[AnswerKey, Any]
"""OPA's answers by (victim uid, the victim team's usage it was asked with)."""


def _serve(rt: Runtime, preemption: Preemption, usage: dict[str, dict[str, int]]) -> bool:
    answers: Answers = {}
    locked: set[str] = set()
    try:
        for option in preemption.options:
            evicted = _on_node(rt, preemption, option, usage, answers, locked)
            if evicted is None:
                continue  # nothing evicted here: the next node may still do
            return evicted
    finally:
        for node in locked:
            lock.release(rt, CONCERN, node, lock.PREEMPTION)
    rt.log.info(
        "preempt.no-allowed-victims",
        preemptor=preemption.preemptor.key,
        reason="policy or disruption budgets refuse every selection on every candidate node",
    )
    rt.summary.action(CONCERN, "preempt", "blocked")
    return False


def _on_node(
    rt: Runtime,
    preemption: Preemption,
    option: NodeOption,
    usage: dict[str, dict[str, int]],
    answers: Answers,
    locked: set[str],
) -> bool | None:
    """True when the node was made to fit; None when nothing was evicted and another node may
    be tried; False when it stopped half way (some evicted, the rest refused). The node's
    disruption lock (`nodeflow.lock`) is taken before its first eviction and recorded
    in `locked` (released by the caller); a node another actor holds, or Karpenter disrupts, is
    skipped."""
    excluded: set[str] = set()
    evicted: list[Candidate] = []
    while True:
        freed: dict[str, int] = {}
        for victim in evicted:
            for r, n in victim.frees.items():
                freed[r] = freed.get(r, 0) + n
        need = {r: n - freed.get(r, 0) for r, n in option.need.items()}
        if all(n <= 0 for n in need.values()):
            _record_preemptor(rt, preemption, option, evicted)
            return True
        remaining = [c for c in option.candidates if c.pod.uid not in excluded and c not in evicted]
        quota = Quota.of(rt.fleet, usage, preemption.team)
        victims = select_victims(remaining, need, quota)
        if victims is None:
            if evicted:
                rt.log.warning(
                    "preempt.partial",
                    preemptor=preemption.preemptor.key,
                    node=option.node,
                    evicted=[v.pod.key for v in evicted],
                    reason="no further victim is allowed; waiting for a later pass",
                )
                rt.summary.action(CONCERN, "preempt", "blocked")
                return False
            return None
        denied = False
        decisions: dict[str, Any] = {}
        for victim, held, key in asked_usages(victims, quota):
            decision = answers.get(key)
            if decision is None:
                decision = rt.opa.decide(
                    "preempt", opa_input(preemption, victim, rt.fleet, held, rt.now)
                )
                answers[key] = decision
            decisions[victim.pod.uid] = decision
            if not decision.allow:
                rt.log.info(
                    "preempt.victim.denied",
                    preemptor=preemption.preemptor.key,
                    victim=victim.pod.key,
                    reasons=list(decision.reasons),
                )
                rt.summary.action(CONCERN, "evict", "denied")
                excluded.add(victim.pod.uid)
                denied = True
                break  # the victims after it were asked with its devices already taken
        if denied:
            continue
        if option.node not in locked:
            if lock.take(rt, CONCERN, option.node, lock.PREEMPTION) is not None:
                return False if evicted else None
            locked.add(option.node)
        if rt.dry_run:
            for victim in victims:
                _would_take(rt, preemption, option, victim, decisions.get(victim.pod.uid))
            return True
        for victim in victims:
            if _take(rt, preemption, option, victim, decisions.get(victim.pod.uid)):
                evicted.append(victim)
                release(usage, victim)
            else:
                excluded.add(victim.pod.uid)
                break


def _why(preemption: Preemption, victim: Candidate, option: NodeOption, decision: Any) -> str:
    policy = f"; policy: {decision.because()}" if decision else ""
    return (
        f"preempted on {option.node} for {preemption.preemptor.key} (priority "
        f"{preemption.priority}, pending {preemption.pending_seconds:.0f}s, needs "
        f"{', '.join(f'{n} {r}' for r, n in preemption.demand.items())}); this pod had the least "
        f"work to lose: {victim.seconds_since_checkpoint:.0f}s since its last checkpoint, priority "
        f"{victim.priority}, {victim.devices} device(s){policy}"
    )


def _would_take(
    rt: Runtime,
    preemption: Preemption,
    option: NodeOption,
    victim: Candidate,
    decision: Any,
    prefix: str = "",
) -> None:
    """Under --dry-run: the eviction, or the stop of the operator's workload (named by its top
    object), that would be done."""
    why = prefix + _why(preemption, victim, option, decision)
    if operator_workload(victim) is not None:
        _stop_workload(rt, preemption, option, victim, why)
        return
    rt.would(CONCERN, "evict", victim.pod.key, why, node=option.node)


def _take(
    rt: Runtime,
    preemption: Preemption,
    option: NodeOption,
    victim: Candidate,
    decision: Any,
) -> bool:
    """True when the victim is gone or going: an operator's pod by stopping its workload
    through the operator's API (`act.victim_stop`, the whole workload is the victim's gang),
    any other pod and its gang mates by eviction; False when it stays."""
    if operator_workload(victim) is None:
        return _evict(rt, preemption, option, victim, decision)
    why = _why(preemption, victim, option, decision)
    stopped = _stop_workload(rt, preemption, option, victim, why)
    if stopped is Stopped.STOPPED:
        rt.events.emit(
            _ref(preemption.preemptor),
            "PreemptedForThis",
            f"stopped the workload of {victim.pod.key} on {option.node} to make room: {why}",
        )
    return stopped is not Stopped.REFUSED


def _stop_workload(
    rt: Runtime, preemption: Preemption, option: NodeOption, victim: Candidate, why: str
) -> Stopped:
    """Stop the victim's operator workload (or say so, under --dry-run) for the preemptor."""
    return stop_victim_workload(
        rt,
        CONCERN,
        victim,
        why,
        event_reason="Preempted",
        preemptor=preemption.preemptor.key,
        node=option.node,
    )


def _evict(
    rt: Runtime,
    preemption: Preemption,
    option: NodeOption,
    victim: Candidate,
    decision: Any,
) -> bool:
    """True when the victim is gone (evicted now, or gone already); False when it stays."""
    pod = victim.pod
    why = _why(preemption, victim, option, decision)
    note = {
        own.PREEMPTED_BY: preemption.preemptor.key,
        own.PREEMPTED_AT: str(int(rt.now)),
        own.PREEMPTION_REASON: why[:1000],
    }
    if not _annotate(rt, pod, note):
        _gone(rt, pod, "gone or replaced by a pod of the same name before it was annotated")
        return True  # the pod judged is gone: its devices are free
    grace = rt.settings.eviction_grace_seconds
    try:
        rt.kube.evict(pod.namespace, pod.name, uid=pod.uid, grace_seconds=grace)
    except TooManyRequestsError as error:
        rt.log.info("preempt.evict.blocked", victim=pod.key, reason=f"disruption budget: {error}")
        rt.summary.action(CONCERN, "evict", "blocked")
        _annotate(rt, pod, dict.fromkeys(note))
        return False
    except NotFoundError:
        _gone(rt, pod, "gone before it was evicted")
        return True
    except ConflictError as error:
        _gone(rt, pod, f"replaced by a pod of the same name, which was not judged: {error}")
        return True
    except ControllerError as error:
        rt.log.warning(
            "preempt.evict.failed",
            victim=pod.key,
            reason=f"eviction failed, annotation taken back: {error}",
        )
        with contextlib.suppress(ControllerError):
            _annotate(rt, pod, dict.fromkeys(note))
        raise
    rt.events.emit(_ref(pod), "Preempted", why, warning=True)
    rt.events.emit(
        _ref(preemption.preemptor),
        "PreemptedForThis",
        f"evicted {pod.key} on {option.node} to make room: {why}",
    )
    rt.done(CONCERN, "evict", pod.key, why, preemptor=preemption.preemptor.key, node=option.node)
    _evict_mates(rt, preemption, victim, why)
    return True


def _evict_mates(rt: Runtime, preemption: Preemption, victim: Candidate, why: str) -> None:
    """The rest of the victim's gang goes with it: a gang missing a pod cannot run, and
    leaving its other pods holding accelerators would waste them. Each mate is annotated and
    evicted like the victim; one that is gone already is fine. A mate that cannot be evicted
    now (its budget) is logged and left to the next pass, which sees the gang short and plans
    nothing on it (the decide step takes gangs whole)."""
    for mate in victim.mates:
        note = {
            own.PREEMPTED_BY: preemption.preemptor.key,
            own.PREEMPTED_AT: str(int(rt.now)),
            own.PREEMPTION_REASON: f"gang of {victim.pod.key}: {why}"[:1000],
        }
        if not _annotate(rt, mate, note):
            continue
        try:
            rt.kube.evict(
                mate.namespace,
                mate.name,
                uid=mate.uid,
                grace_seconds=rt.settings.eviction_grace_seconds,
            )
        except (NotFoundError, ConflictError):
            continue
        except TooManyRequestsError as error:
            rt.log.warning("preempt.evict.gang-mate-blocked", victim=mate.key, reason=str(error))
            continue
        rt.events.emit(_ref(mate), "Preempted", f"gang of {victim.pod.key}: {why}", warning=True)
        rt.done(
            CONCERN,
            "evict",
            mate.key,
            f"gang of {victim.pod.key}",
            preemptor=preemption.preemptor.key,
        )


def _gone(rt: Runtime, pod: Pod, reason: str) -> None:
    """The pod judged is no longer there (404, or a uid precondition missed): not evicted."""
    rt.log.info("preempt.evict.gone", victim=pod.key, uid=pod.uid, reason=reason)
    rt.summary.action(CONCERN, "evict", "gone")


def _annotate(rt: Runtime, pod: Pod, annotations: dict[str, Any]) -> bool:
    """Merge-patch the annotations (None removes one) onto this pod and no other: the patch
    names the pod's uid, which the server refuses to change (HTTP 422) on a pod recreated under
    the same name. False when the pod is gone or was replaced."""
    path = pod_path(pod.namespace, pod.name)
    try:
        rt.kube.merge_patch(path, {"metadata": {"uid": pod.uid, "annotations": annotations}})
    except NotFoundError:
        return False
    except PermanentError:
        try:
            current = rt.kube.get(path)
        except NotFoundError:
            return False
        if (current.get("metadata") or {}).get("uid") != pod.uid:
            return False
        raise
    return True


def _record_preemptor(
    rt: Runtime, preemption: Preemption, option: NodeOption, evicted: list[Candidate]
) -> None:
    if rt.dry_run or not evicted:
        return
    pod = preemption.preemptor
    victims = ",".join(v.pod.key for v in evicted)
    try:
        patch_fresh(
            rt.kube,
            pod_path(pod.namespace, pod.name),
            None,
            lambda _: {
                "metadata": {
                    "annotations": {
                        own.PREEMPTION_VICTIMS: f"{option.node}:{victims}"[:1000],
                        own.PREEMPTED_AT: str(int(rt.now)),
                    }
                }
            },
        )
    except NotFoundError:
        return
    rt.done(CONCERN, "preempt", pod.key, f"room made on {option.node} by evicting {victims}")
