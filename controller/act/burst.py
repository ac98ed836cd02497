"""Bursting written: the policy asked, the team's Queue annotated, its waiting pods admitted.

For each ask (`decide.burst.Ask`) the policy (`fleetplane/decisions/burst`) is put each input
in tier order; the first allow opens that tier: the team's Volcano Queue gets
`fleetplane.dev/burst-tier`, `-since` and `-reason` (a merge patch on the version read; on a
conflict it is read again and written only if its open tier is still the one planned from, since
Volcano's own status writes conflict without changing the tier), a Normal Event `BurstOpened`
on the waiting pod that asked, and every waiting pod of the team is admitted. A refusal is
logged with the policy's reasons and a Warning Event `BurstRefused` on that pod; nothing is
written. Admitting a pod adds the tolerations of the open tiers to its spec (read fresh, same
uid, the list as it is plus what it lacks, on its resourceVersion: the API server accepts only
additions to a pod's tolerations; read again on a conflict, as the scheduler writes a waiting
pod's status) and records `BurstAdmitted` on it. Closing takes the Queue's
annotations off. Under --dry-run each write is shown instead. The actions are counted under the
concern `burst` (`open`, `admit`, `close`); the accelerators each team's running pods hold on
burst nodes are exported every pass (`fleetplane_team_burst_gpus`), which the monthly bill
integrates into burst GPU-hours.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from controller.act.events import ObjectRef
from controller.act.runtime import Runtime
from controller.act.writes import patch_fresh
from controller.decide.burst import (
    BURST_REASON,
    BURST_SINCE,
    BURST_TIER,
    Ask,
    BurstPlan,
    Close,
    missing_tolerations,
    open_tier,
)
from controller.errors import ConflictError, NotFoundError
from controller.observe.model import Pod

CONCERN = "burst"
DECISION = "burst"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"


def _ref(pod: Pod) -> ObjectRef:
    return ObjectRef(
        api_version="v1", kind="Pod", namespace=pod.namespace, name=pod.name, uid=pod.uid
    )


def act_on_bursts(rt: Runtime, plan: BurstPlan) -> None:
    for state in plan.teams:
        for (tier, model), devices in sorted(state.on_burst.items()):
            rt.summary.set("team_burst_gpus", devices, team=state.team, tier=tier, model=model)
        if state.waiting or state.tier != "reserved":
            rt.log.info(
                "burst.team",
                team=state.team,
                queue=state.queue,
                tier=state.tier,
                waiting=len(state.waiting),
                on_burst=sum(state.on_burst.values()),
            )
    for admit in plan.admits:
        reason = f"team {admit.team}'s open tier is {admit.tier}"
        rt.guarded(
            CONCERN,
            "admit",
            admit.pod.key,
            partial(_admit, rt, admit.pod, admit.tolerations, reason),
        )
    for ask in plan.asks:
        rt.guarded(CONCERN, "open", ask.queue, partial(_ask, rt, ask))
    for close in plan.closes:
        rt.guarded(CONCERN, "close", close.queue, partial(_close, rt, close))


def _ask(rt: Runtime, ask: Ask) -> None:
    first_refusal: list[str] = []
    for pool, given in ask.inputs:
        decision = rt.opa.decide(DECISION, given)
        if decision.allow:
            _open(rt, ask, given["to_tier"], pool.name, decision.because())
            return
        if not first_refusal:
            first_refusal = list(decision.reasons)
    why = "; ".join(first_refusal) or "no tier after this one serves the work"
    rt.log.info(
        "burst.refused",
        team=ask.team,
        queue=ask.queue,
        claimant=ask.claimant.key,
        reasons=first_refusal,
    )
    rt.summary.action(CONCERN, "open", "denied")
    if not rt.dry_run:
        rt.events.emit(_ref(ask.claimant), "BurstRefused", why, warning=True)


def _open(rt: Runtime, ask: Ask, tier: str, pool: str, because: str) -> None:
    told = f"team {ask.team} may burst to {tier} (pool {pool}): {because}"
    if rt.dry_run:
        rt.would(CONCERN, "open", f"queue {ask.queue}", told, tier=tier)
    else:
        path = f"{QUEUES}/{ask.queue}"
        annotations = {
            BURST_TIER: tier,
            BURST_SINCE: str(int(rt.now)),
            BURST_REASON: because[:1000],
        }

        def still_wanted(current: dict[str, Any] | None) -> dict[str, Any] | None:
            # Volcano writes the Queue's status as its pods come and go, which conflicts with
            # the version read and says nothing about the tier: only a tier changed since the
            # plan (another writer opened or closed one) makes the opening unwanted.
            found = current if current is not None else queue
            if open_tier((found.get("metadata") or {}).get("annotations") or {}) != ask.tier:
                return None
            return {"metadata": {"annotations": annotations}}

        queue = rt.kube.get(path)
        written = patch_fresh(rt.kube, path, queue["metadata"].get("resourceVersion"), still_wanted)
        if written is None:
            rt.log.info(
                "burst.open.raced",
                queue=ask.queue,
                reason=f"the Queue's open tier is no longer {ask.tier}; the next pass decides",
            )
            return
        rt.events.emit(_ref(ask.claimant), "BurstOpened", told)
        rt.done(CONCERN, "open", f"queue {ask.queue}", told, tier=tier)
    for pod in ask.waiting:
        lacking = missing_tolerations(pod, tier)
        if lacking:
            reason = f"team {ask.team} may burst to {tier}"
            rt.guarded(CONCERN, "admit", pod.key, partial(_admit, rt, pod, lacking, reason))


def _admit(rt: Runtime, pod: Pod, tolerations: list[dict[str, str]], reason: str) -> None:
    told = f"tolerates {', '.join(t['key'] + '=' + t.get('value', '*') for t in tolerations)}: {reason}"
    if rt.dry_run:
        rt.would(CONCERN, "admit", pod.key, told)
        return
    path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
    outcome = "gone"

    def lacking(current: dict[str, Any] | None) -> dict[str, Any] | None:
        # The scheduler writes a waiting pod's status at each try, which conflicts with the
        # version read: on a conflict the pod is read again and judged as it is then.
        nonlocal outcome
        found = current if current is not None else fresh
        if found["metadata"].get("uid") != pod.uid or found["spec"].get("nodeName"):
            outcome = "gone"
            return None
        have: list[dict[str, Any]] = list(found["spec"].get("tolerations") or [])
        adding = [t for t in tolerations if t not in have]
        if not adding:
            outcome = "already"
            return None
        return {"spec": {"tolerations": [*have, *adding]}}

    try:
        fresh = rt.kube.get(path)
        written = patch_fresh(rt.kube, path, fresh["metadata"].get("resourceVersion"), lacking)
    except (NotFoundError, ConflictError) as error:  # gone, or changed twice: the next pass
        rt.log.info("burst.admit.skipped", pod=pod.key, reason=str(error))
        rt.summary.action(CONCERN, "admit", "gone")
        return
    if written is None:
        rt.summary.action(CONCERN, "admit", outcome)
        return
    rt.events.emit(_ref(pod), "BurstAdmitted", told)
    rt.done(CONCERN, "admit", pod.key, told)


def _close(rt: Runtime, close: Close) -> None:
    told = f"team {close.team}'s {close.tier} tier closed: {close.reason}"
    if rt.dry_run:
        rt.would(CONCERN, "close", f"queue {close.queue}", told)
        return
    try:
        rt.kube.merge_patch(
            f"{QUEUES}/{close.queue}",
            {"metadata": {"annotations": dict.fromkeys((BURST_TIER, BURST_SINCE, BURST_REASON))}},
        )
    except NotFoundError as error:
        rt.log.info("burst.close.gone", queue=close.queue, reason=str(error))
        return
    rt.done(CONCERN, "close", f"queue {close.queue}", told)


def read_queue_annotations(rt: Runtime) -> dict[str, dict[str, str]] | None:
    """The Volcano Queues' annotations by name; None when Volcano's API is not served."""
    try:
        found = rt.kube.list(QUEUES, limit=500)
    except NotFoundError:
        return None
    out: dict[str, dict[str, str]] = {}
    for raw in found:
        metadata = raw.get("metadata") or {}
        name = metadata.get("name")
        if isinstance(name, str) and name:
            annotations = metadata.get("annotations") or {}
            out[name] = {k: v for k, v in annotations.items() if isinstance(v, str)}
    return out
