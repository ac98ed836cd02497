"""Approval bindings: an approval is consumed by the workload that uses it.

An approval (`data.fleetplane.approvals[id]`: team, max_accelerators, expires_at, uid) is
granted by platform admins and, until the controller binds it, any workload of its team may
name it (`fleetplane.dev/approval-id` on the template). The controller binds each approval in
use to the first workload that uses it (the earliest created; by namespace and name on a tie):
its `uid` becomes that workload's (the top of its owners, `decide.lineage`, so a Deployment's
next ReplicaSet or a CronJob's next Job still may use it), after which the gate refuses it to
any other object (policies/fleetplane/admission/accelerators.rego `approval_refusal`).

A binding is never undone: a workload deleted does not give its approval back. Only approvals
OPA knows, of the using workload's team and unexpired, are bound (the gate refused the others
anyway); a workload that names an approval bound to another is left to the gate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from controller.config import FleetView
from controller.decide.lineage import lineage
from controller.observe.model import Pod
from controller.observe.workload_objects import WorkloadObject
from fleet import labels as keys


@dataclass(frozen=True, slots=True, kw_only=True)
class Binding:
    approval_id: str
    uid: str
    kind: str
    namespace: str
    name: str
    team: str


@dataclass(kw_only=True)
class BindingPlan:
    """new: the bindings to make this pass. bound: every approval's binding after them
    (approval id -> uid), what the controller keeps for OPA's next start. unusable: workloads
    naming an approval they cannot be bound to, with why (logged)."""

    new: list[Binding] = field(default_factory=list)
    bound: dict[str, str] = field(default_factory=dict)
    unusable: list[tuple[Binding, str]] = field(default_factory=list)

    def document(self) -> dict[str, dict[str, str]]:
        """What OPA loads at start beside the granted approvals: id -> {"uid": uid}."""
        return {approval_id: {"uid": uid} for approval_id, uid in sorted(self.bound.items())}


def approval_users(
    pods: list[Pod], objects: dict[str, WorkloadObject], fleet: FleetView
) -> list[Binding]:
    """Every workload of a team that names an approval on a template: the workload objects
    observed and the accelerator pods (a bare pod, a Job's), each as the top of its owners;
    one entry per (approval, workload)."""
    found: dict[tuple[str, str], tuple[float, Binding]] = {}

    def add(approval_id: str | None, namespace: str, top: Any) -> None:
        team = fleet.namespaces.get(namespace)
        if not approval_id or team is None:
            return
        binding = Binding(
            approval_id=approval_id,
            uid=top.top_uid,
            kind=top.kind,
            namespace=namespace,
            name=top.name,
            team=team,
        )
        found.setdefault((approval_id, top.top_uid), (top.created, binding))

    for o in objects.values():
        add(o.approval_id, o.namespace, lineage(o.uid, o.kind, o.name, o.created, o.owner, objects))
    for pod in pods:
        # Few pods name an approval: the chain above the others is not worked out (`add`
        # would drop them anyway).
        approval_id = pod.annotations.get(keys.APPROVAL_ID)
        if approval_id:
            top = lineage(pod.uid, "Pod", pod.name, pod.created, pod.owner, objects)
            add(approval_id, pod.namespace, top)
    ordered = sorted(found.values(), key=lambda f: (f[0], f[1].namespace, f[1].name, f[1].uid))
    return [binding for _, binding in ordered]


def plan_bindings(
    approvals: dict[str, Any],
    kept: dict[str, str],
    users: list[Binding],
    now: float,
) -> BindingPlan:
    """approvals: OPA's `data.fleetplane.approvals` (id -> approval). kept: the bindings the
    controller kept for OPA's start (id -> uid), which win over an approval OPA shows unbound
    (a replica that lost a binding). users: approval_users, earliest first."""
    plan = BindingPlan()
    for approval_id, approval in approvals.items():
        uid = approval.get("uid") if isinstance(approval, dict) else None
        uid = kept.get(approval_id) or uid
        if isinstance(uid, str) and uid:
            plan.bound[approval_id] = uid
    for user in users:
        approval = approvals.get(user.approval_id)
        if not isinstance(approval, dict):
            plan.unusable.append((user, "no such approval in OPA"))
            continue
        holder = plan.bound.get(user.approval_id)
        if holder == user.uid:
            continue
        if holder is not None:
            plan.unusable.append((user, f"approval bound to another workload (uid {holder})"))
            continue
        if approval.get("team") != user.team:
            plan.unusable.append((user, f"approval granted to team {approval.get('team')}"))
            continue
        expires = approval.get("expires_at")
        if not isinstance(expires, int | float) or expires <= now:
            plan.unusable.append((user, "approval expired or without an expiry"))
            continue
        plan.bound[user.approval_id] = user.uid
        plan.new.append(user)
    return plan
