"""One disruptive actor per node: a lock in the node's annotations, and the order of actors.

Every actor of the product that takes work off a node takes the node's lock first: GPU
remediation and driver upgrades when a node enters their workflow (released when it leaves),
priority preemption for the evictions it makes on a node (released after them). Karpenter is
the fourth actor; it does not know this lock, so it is kept off through its own contract: while
a product actor holds a node, the node carries `karpenter.sh/do-not-disrupt: "true"` (set by
the lock, and removed by it only when the lock set it). Conversely a node Karpenter is already
disrupting (its taint `karpenter.sh/disrupted`, its NodeClaim being deleted, the node itself
being deleted) is taken by no one.

The lock, on the node:

    fleetplane.dev/disruption-holder: <actor>          who holds the node
    fleetplane.dev/disruption-since: <epoch seconds>   since when
    fleetplane.dev/disruption-wanted: <actor>          the highest-ranked actor refused meanwhile
    fleetplane.dev/disruption-wanted-since: <epoch seconds>
    fleetplane.dev/node-do-not-disrupt-by: lock        the lock set karpenter.sh/do-not-disrupt

It is taken by one merge patch carrying the resourceVersion the decision was made on, so two
actors (or an actor and Karpenter's taint) racing for a node cannot both win: the loser's patch
conflicts, it reads the node again and finds it held. A holder is never displaced: the order
says who gets a node that is wanted by more than one, not who may break a hold.

The order, highest first (`RANK`): remediation > upgrade > preemption > consolidation.

- Remediation first: a faulty GPU harms every workload on the node and any later actor's work
  (an upgraded node with a broken GPU fails its validation anyway); it cannot be postponed.
- Then the driver upgrade: it runs inside maintenance windows and is throttled per pool; a
  missed window postpones a driver fix by days.
- Then preemption: it serves one pending workload and has other candidate nodes; it yields.
- Consolidation (Karpenter) last: it saves money, loses nothing by waiting, and re-evaluates
  continuously.

An actor refused because the node is held records that it wants it (when it outranks the want
already recorded); when the holder releases the node, an actor ranked below a live want is
refused ("wanted first by ..."), so the higher-ranked one gets it on its next pass. A want lives
`WANT_SECONDS` (each refused attempt renews it). A hold lives while its workflow's state label
holds the node (`claims`), or `HOLD_SECONDS` from when it was taken (a preemption's hold, or a
workflow whose pass died between the lock and its state label); an older hold is stale and may
be taken.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any, Final

from controller.act.runtime import Runtime
from controller.act.writes import patch_fresh
from controller.errors import ControllerError, NotFoundError, PermanentError
from controller.nodeflow import claims
from controller.observe.kube import object_path

HOLDER: Final = "fleetplane.dev/disruption-holder"
HELD_SINCE: Final = "fleetplane.dev/disruption-since"
WANTED: Final = "fleetplane.dev/disruption-wanted"
WANTED_SINCE: Final = "fleetplane.dev/disruption-wanted-since"
NODE_PROTECTED_BY: Final = "fleetplane.dev/node-do-not-disrupt-by"
DO_NOT_DISRUPT: Final = "karpenter.sh/do-not-disrupt"
KARPENTER_DISRUPTED: Final = "karpenter.sh/disrupted"
"""The NoSchedule taint Karpenter puts on a node it has begun to disrupt."""
NODECLAIM_API: Final = "karpenter.sh/v1"

REMEDIATION: Final = "remediation"
UPGRADE: Final = "upgrade"
PREEMPTION: Final = "preemption"
CONSOLIDATION: Final = "consolidation"
RANK: Final = {REMEDIATION: 3, UPGRADE: 2, PREEMPTION: 1, CONSOLIDATION: 0}
"""Who gets a node wanted by more than one (highest first); see the module's docstring."""

WORKFLOW_CLAIMS: Final = {REMEDIATION: claims.HEALTH, UPGRADE: claims.UPGRADE}
HANDED_OVER: Final = {REMEDIATION: frozenset({"needs-replacement"})}
"""States in which a workflow keeps its claim but gives the lock back: a drained node that needs
replacing is one Karpenter may remove (and replace) without losing any work."""
HOLD_SECONDS: Final = 900
WANT_SECONDS: Final = 1800


def _node_path(name: str) -> str:
    return object_path("v1", "nodes", None, name)


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


def _rank(actor: str | None) -> int:
    return RANK.get(actor or "", -1)


def live_holder(node: dict[str, Any], now: float) -> str | None:
    """The actor holding the node, unless its hold is stale."""
    metadata = node.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    actor = annotations.get(HOLDER)
    if not actor:
        return None
    claim = WORKFLOW_CLAIMS.get(actor)
    if claim is not None and _holds(actor, (metadata.get("labels") or {}).get(claim.label)):
        return str(actor)
    since = _number(annotations.get(HELD_SINCE))
    if since is not None and now - since <= HOLD_SECONDS:
        return str(actor)
    return None


def live_want(annotations: dict[str, str], now: float) -> str | None:
    actor = annotations.get(WANTED)
    since = _number(annotations.get(WANTED_SINCE))
    if actor and since is not None and now - since <= WANT_SECONDS:
        return actor
    return None


def karpenter_disrupting(node: dict[str, Any]) -> str | None:
    """Why Karpenter is already taking this node away, from the node itself; None if not."""
    metadata = node.get("metadata") or {}
    if metadata.get("deletionTimestamp"):
        return "the node is being deleted"
    for taint in (node.get("spec") or {}).get("taints") or ():
        if taint.get("key") == KARPENTER_DISRUPTED:
            return f"Karpenter is disrupting it (taint {KARPENTER_DISRUPTED})"
    return None


def nodeclaim_of(node: dict[str, Any]) -> str | None:
    for ref in (node.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("kind") == "NodeClaim" and ref.get("apiVersion") == NODECLAIM_API:
            return str(ref.get("name") or "") or None
    return None


def why_not(node: dict[str, Any], actor: str, now: float) -> str | None:
    """Why `actor` may not take this node now (as read); None when it may."""
    disrupting = karpenter_disrupting(node)
    if disrupting:
        return disrupting
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    holder = live_holder(node, now)
    if holder is not None and holder != actor:
        since = annotations.get(HELD_SINCE, "?")
        return f"held by {holder} since {since}; one disruptive actor per node"
    wanted = live_want(annotations, now)
    if holder is None and wanted is not None and _rank(wanted) > _rank(actor):
        return (
            f"wanted first by {wanted}, which ranks above {actor} "
            "(remediation > upgrade > preemption > consolidation)"
        )
    return None


def claim_deleting(rt: Runtime, node: dict[str, Any]) -> str | None:
    """Karpenter deletes a NodeClaim before its node: one being deleted (or gone) means the
    node is on its way out."""
    name = nodeclaim_of(node)
    if name is None:
        return None
    try:
        claim = rt.kube.get(object_path(NODECLAIM_API, "nodeclaims", None, name))
    except NotFoundError:
        return f"its NodeClaim {name} is gone"
    except PermanentError as error:
        # Not readable (the controller's role lacks `get nodeclaims.karpenter.sh`): the node's
        # own marks (Karpenter's taint, its deletion) still keep actors off it.
        rt.log.warning("lock.nodeclaim.unreadable", nodeclaim=name, error=str(error))
        return None
    if (claim.get("metadata") or {}).get("deletionTimestamp"):
        return f"Karpenter is deleting its NodeClaim {name}"
    return None


def take(rt: Runtime, concern: str, name: str, actor: str) -> str | None:
    """Take the node's lock for `actor`. None when `actor` holds it now (taken, or held
    already); else why not, logged and counted (`hold-node` refused). Under --dry-run nothing
    is read or written (a dry run's act makes no API request): it is shown as taken."""
    if rt.dry_run:
        rt.would(concern, "hold-node", name, f"take the node's disruption lock for {actor}")
        return None
    try:
        node = rt.kube.get(_node_path(name))
    except NotFoundError:
        return _refused(rt, concern, name, actor, "the node is gone")
    why = why_not(node, actor, rt.now) or claim_deleting(rt, node)
    if why is not None:
        if live_holder(node, rt.now) not in (None, actor):
            _want(rt, name, actor, node)
        return _refused(rt, concern, name, actor, why)
    if live_holder(node, rt.now) == actor:
        return None
    refusal: list[str] = []

    def build(current: dict[str, Any] | None) -> dict[str, Any] | None:
        seen = current if current is not None else node
        found = why_not(seen, actor, rt.now)
        if found is not None:
            refusal.append(found)
            return None
        annotations = (seen.get("metadata") or {}).get("annotations") or {}
        patch: dict[str, str | None] = {HOLDER: actor, HELD_SINCE: str(int(rt.now))}
        if annotations.get(WANTED) == actor:
            patch |= {WANTED: None, WANTED_SINCE: None}
        if annotations.get(DO_NOT_DISRUPT) != "true":
            patch |= {DO_NOT_DISRUPT: "true", NODE_PROTECTED_BY: "lock"}
        return {"metadata": {"annotations": patch}}

    version = (node.get("metadata") or {}).get("resourceVersion")
    written = patch_fresh(rt.kube, _node_path(name), version, build)
    if written is None:
        return _refused(rt, concern, name, actor, refusal[0] if refusal else "changed meanwhile")
    rt.done(concern, "hold-node", name, f"disruption lock taken for {actor}", actor=actor)
    return None


def take_all(rt: Runtime, concern: str, names: Iterable[str], actor: str) -> str | None:
    """Every node's lock, or none: one refused releases those taken here (nodes of one gang
    are disrupted together or not at all)."""
    taken: list[str] = []
    for name in names:
        why = take(rt, concern, name, actor)
        if why is not None:
            for held in taken:
                release(rt, concern, held, actor)
            return f"node {name}: {why}"
        taken.append(name)
    return None


def release(rt: Runtime, concern: str, name: str, actor: str) -> None:
    """Give the node's lock back, if `actor` holds it; `karpenter.sh/do-not-disrupt` goes with
    it when the lock set it."""
    if rt.dry_run:
        rt.would(concern, "release-node", name, f"release the node's disruption lock of {actor}")
        return

    def build(current: dict[str, Any] | None) -> dict[str, Any] | None:
        seen = current if current is not None else rt.kube.get(_node_path(name))
        annotations = (seen.get("metadata") or {}).get("annotations") or {}
        if annotations.get(HOLDER) != actor:
            return None
        patch: dict[str, str | None] = {HOLDER: None, HELD_SINCE: None}
        if annotations.get(NODE_PROTECTED_BY) == "lock":
            patch |= {DO_NOT_DISRUPT: None, NODE_PROTECTED_BY: None}
        return {
            "metadata": {
                "annotations": patch,
                "resourceVersion": (seen.get("metadata") or {}).get("resourceVersion"),
            }
        }

    try:
        written = patch_fresh(rt.kube, _node_path(name), None, build)
    except NotFoundError:
        return
    if written is not None:
        rt.done(concern, "release-node", name, f"disruption lock of {actor} released", actor=actor)


def _want(rt: Runtime, name: str, actor: str, node: dict[str, Any]) -> None:
    """Record that `actor` waits for the node, unless a higher- or equal-ranked live want is
    there already. A conflict (the node lifecycle controller, Karpenter or a kubelet wrote the
    Node since it was read) reads it again and decides again; a second one or a gone node is
    fine: the next refusal records it."""

    def build(current: dict[str, Any] | None) -> dict[str, Any] | None:
        seen = current if current is not None else node
        annotations = (seen.get("metadata") or {}).get("annotations") or {}
        wanted = live_want(annotations, rt.now)
        if wanted is not None and wanted != actor and _rank(wanted) >= _rank(actor):
            return None
        return {"metadata": {"annotations": {WANTED: actor, WANTED_SINCE: str(int(rt.now))}}}

    version = (node.get("metadata") or {}).get("resourceVersion")
    with contextlib.suppress(ControllerError):
        patch_fresh(rt.kube, _node_path(name), version, build)


def _refused(rt: Runtime, concern: str, name: str, actor: str, why: str) -> str:
    rt.log.info(f"{concern}.hold-node.refused", node=name, actor=actor, reason=why)
    rt.summary.action(concern, "hold-node", "refused")
    return why


def takes(actor: str, before: str | None, after: str | None) -> bool:
    """A workflow step from `before` to `after` brings the node into the workflow's hold."""
    return not _holds(actor, before) and _holds(actor, after)


def releases(actor: str, before: str | None, after: str | None) -> bool:
    """A workflow step from `before` to `after` lets the node out of the workflow's hold."""
    return _holds(actor, before) and not _holds(actor, after)


def _holds(actor: str, state: str | None) -> bool:
    claim = WORKFLOW_CLAIMS[actor]
    if state is None or state in HANDED_OVER.get(actor, frozenset()):
        return False
    return claim.held({claim.label: state}) is not None
