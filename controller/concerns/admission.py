"""The admission concern's step: the documents the gate reads and only the controller writes.

The per-workload records a scale subresource is judged by, the DRA claim records a pod that
uses a claim is judged by (decide/claim_records.py), the reservations of admitted
workloads, and the approvals' bindings (decide/records.py, reservations.py, approvals.py). Each
is its own action: a failure of one leaves the others written. `fleetplane controller admission
--watch` runs this concern alone between passes (controller/admission_keeper.py).
"""

from __future__ import annotations

from controller.act.admission_data import act_on_bindings, act_on_records, act_on_reservations
from controller.act.claim_data import act_on_claim_records
from controller.act.opa_files import kept_bindings
from controller.concerns import PassView
from controller.config import period_seconds
from controller.decide.approvals import approval_users, plan_bindings
from controller.decide.claim_records import claim_records
from controller.decide.lineage import by_uid
from controller.decide.records import workload_records
from controller.decide.reservations import plan_reservations
from controller.errors import PermanentError


def run(view: PassView) -> None:
    rt, snapshot = view.rt, view.snapshot
    objects = by_uid(snapshot.workload_objects)
    act_on_records(rt, workload_records(snapshot.workload_objects, rt.fleet.system_namespaces))
    act_on_claim_records(rt, claim_records(snapshot.claims, rt.fleet.system_namespaces))
    period = period_seconds(rt.fleet, rt.settings)
    reservations = plan_reservations(
        snapshot.pods, snapshot.nodes, objects, rt.fleet, rt.now, horizon_seconds=2 * period
    )
    act_on_reservations(rt, reservations)
    # Approvals are granted in OPA (rendered, or by an approver): read them there, with the
    # bindings kept for OPA's start (they win over a replica that shows one unbound).
    approvals = rt.opa.get_data("fleetplane/approvals") or {}
    if not isinstance(approvals, dict):
        raise PermanentError(f"data.fleetplane.approvals is not an object: {approvals!r:.200}")
    kept = kept_bindings(rt.kube, rt.settings.opa_data_configmap)
    users = approval_users(snapshot.pods, objects, rt.fleet)
    act_on_bindings(rt, plan_bindings(approvals, kept, users, rt.now))
