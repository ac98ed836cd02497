"""`data.fleetplane.workloads`: what one replica of each scalable workload holds.

The Scale object the API server sends when a workload is scaled through its `scale`
subresource carries only the parent's name, uid and replica count, no template; so the gate
judges such a scale-up from a record the controller keeps per scalable workload
(policies/fleetplane/admission/holdings.rego `scale_record`, which must carry the parent's uid)
and refuses it without one. A record is kept for every Deployment, StatefulSet and ReplicaSet
outside the platform's own namespaces, with or without accelerators (a workload without them
is recorded with 0 per replica, so its scale-ups are allowed). docs/contracts.md has the shape.
"""

from __future__ import annotations

from typing import Any

from controller.observe.workload_objects import SCALABLE_KINDS, WorkloadObject


def workload_records(
    objects: list[WorkloadObject], system_namespaces: frozenset[str]
) -> dict[str, dict[str, dict[str, Any]]]:
    """namespace -> record key -> {uid, kind, workload_type, devices_per_replica,
    approval_id, replicas, pod_labels}, for the scalable objects outside `system_namespaces` (the gate does not
    judge those)."""
    records: dict[str, dict[str, dict[str, Any]]] = {}
    for found in sorted(objects, key=lambda o: (o.namespace, o.record_key)):
        if found.kind not in SCALABLE_KINDS or found.namespace in system_namespaces:
            continue
        records.setdefault(found.namespace, {})[found.record_key] = {
            "uid": found.uid,
            "kind": found.kind,
            "workload_type": found.workload_type,
            "devices_per_replica": found.devices_per_replica,
            "approval_id": found.approval_id,
            # what a disruption budget's selector matches, and how many pods it keeps
            # (policies/fleetplane/admission/disruption.rego `blocks_every_eviction_now`)
            "replicas": found.replicas,
            "pod_labels": found.pod_labels,
        }
    return records
