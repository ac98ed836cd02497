"""Carry out the admission-data plans: the documents the gate reads and the controller keeps.

Each pass brings the workload records (`data.fleetplane.workloads`) and the reservations
(`data.fleetplane.reservations`) of every OPA replica to what it decided, writing the entries
that changed (a PATCH of the difference with what the replica holds, which also removes the
entries of workloads gone since: controller/act/opa_patch.py), binds each newly used approval
(`PUT data.fleetplane.approvals/<id>/uid`, every replica), and keeps the three for OPA's next
start: the bindings in the ConfigMap OPA loads, the two fleet-sized documents split over
ConfigMaps beside it (fleet/opa_shards.py). Bookkeeping like the spend document: logged and
counted, no Event per write (a binding is logged with the workload it binds to).
"""

from __future__ import annotations

from functools import partial
from typing import Any
from urllib.parse import quote

from controller.act.opa_documents import (
    keep,
    keep_sharded,
    publish,
    publish_records,
    put_everywhere,
)
from controller.act.runtime import Runtime
from controller.decide.approvals import Binding, BindingPlan
from controller.decide.reservations import ReservationPlan
from fleet.opa import APPROVAL_BINDINGS_FILE_KEY

CONCERN = "admission"
WORKLOADS_PATH = "fleetplane/workloads"
RESERVATIONS_PATH = "fleetplane/reservations"


def act_on_records(rt: Runtime, records: dict[str, dict[str, dict[str, Any]]]) -> None:
    summary = publish_records(rt, CONCERN, WORKLOADS_PATH, records, "scalable workloads")
    keep_sharded(rt, CONCERN, "workloads", records, summary)


def act_on_reservations(rt: Runtime, plan: ReservationPlan) -> None:
    document = plan.document()
    teams = ", ".join(
        f"{team} ${sum(doc['expiring'].values()):,.2f} ({len(doc['workloads'])} workloads)"
        for team, doc in sorted(document.items())
    )
    summary = teams or "nothing reserved"
    # One line per workload only when asked for (--log-level debug): the reservations are
    # recomputed every pass (and by the keeper at every pod change), and at 100,000 pods info
    # lines here were 80,000 a pass repeating what the publish line sums up; unasked, not even
    # their fields are built.
    if rt.log.debugging():
        for r in plan.reservations:
            rt.log.debug(
                f"{CONCERN}.reserve",
                team=r.team,
                workload=f"{r.kind}/{r.namespace}/{r.name}",
                uid=r.key,
                usd=round(r.usd, 2),
                expires_at=r.expires_at,
                pods=r.pods,
            )
    publish(rt, CONCERN, RESERVATIONS_PATH, document, summary, depth=3)
    keep_sharded(rt, CONCERN, "reservations", document, summary)


def act_on_bindings(rt: Runtime, plan: BindingPlan) -> None:
    for user, why in plan.unusable:
        rt.log.info(
            f"{CONCERN}.approval-not-bound",
            approval=user.approval_id,
            workload=f"{user.kind}/{user.namespace}/{user.name}",
            reason=why,
        )
    bound = set(plan.bound)
    for binding in plan.new:
        if rt.guarded(CONCERN, "bind", _target(binding), partial(_bind, rt, binding)) is None:
            bound.discard(binding.approval_id)  # not in OPA: not kept either, retried next pass
    kept = {k: v for k, v in plan.document().items() if k in bound}
    keep(rt, CONCERN, APPROVAL_BINDINGS_FILE_KEY, kept, f"{len(kept)} approvals bound")


def _target(binding: Binding) -> str:
    return f"data.fleetplane.approvals.{binding.approval_id}.uid"


def _bind(rt: Runtime, binding: Binding) -> bool:
    reason = (
        f"approval {binding.approval_id} consumed by {binding.kind} "
        f"{binding.namespace}/{binding.name} (uid {binding.uid}), the first workload of team "
        f"{binding.team} to use it"
    )
    if rt.dry_run:
        rt.would(CONCERN, "bind", _target(binding), reason)
        return True
    path = f"fleetplane/approvals/{quote(binding.approval_id, safe='')}/uid"
    put_everywhere(rt, path, binding.uid, f"approval {binding.approval_id}'s binding")
    rt.done(CONCERN, "bind", _target(binding), reason, uid=binding.uid)
    return True
