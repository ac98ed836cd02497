"""The workload objects above pods: what the gate judged, and what OPA's records are about.

A pass lists Deployments, StatefulSets, ReplicaSets and Jobs (JSON; each slimmed to the fields
the admission documents need: identity, owner, replicas, and one pod's accelerator demand,
workload type and approval id from its template). The first three are the kinds with a `scale`
subresource whose records the gate reads (docs/contracts.md `data.fleetplane.workloads`); Jobs
are listed so that a pod's chain of owners reaches the workload the gate judged (a CronJob's
Job's pod is the CronJob's, for reservations and approvals).
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from controller.observe.json_fields import (
    DecodeError,
    decoding,
    integer_field,
    object_field,
    root_sections,
    string_field,
    string_map_field,
)
from controller.observe.model import OwnerRef, controller_owner, parse_time, pod_demand
from controller.views import view
from fleet import labels as keys

WORKLOAD_APIS = {
    "Deployment": ("apps", "deployments", "/apis/apps/v1/deployments"),
    "StatefulSet": ("apps", "statefulsets", "/apis/apps/v1/statefulsets"),
    "ReplicaSet": ("apps", "replicasets", "/apis/apps/v1/replicasets"),
    "Job": ("batch", "jobs", "/apis/batch/v1/jobs"),
}
"""kind -> (API group, resource, list path) of the workload objects a pass observes."""

SCALABLE_KINDS = frozenset({"Deployment", "StatefulSet", "ReplicaSet"})
"""The kinds observed that have a `scale` subresource (the gate's records are of these)."""


@view
class WorkloadObject:
    """kind, group, resource: as the API names them. owner: the controlling owner (a
    Deployment of a ReplicaSet, a CronJob of a Job), or None. replicas: spec.replicas (Jobs:
    parallelism), None when unset. demand: accelerators of one pod of its template, per
    resource, as the gate counts them. workload_type, approval_id: the template's label and
    annotation, None without. pod_labels: the template's labels (what a disruption budget's
    selector is matched against)."""

    kind: str
    group: str
    resource: str
    namespace: str
    name: str
    uid: str
    created: float
    owner: OwnerRef | None
    replicas: int | None
    demand: dict[str, int]
    workload_type: str | None
    approval_id: str | None
    pod_labels: dict[str, str] = field(default_factory=dict)

    @property
    def devices_per_replica(self) -> int:
        return sum(self.demand.values())

    @property
    def record_key(self) -> str:
        """Its key in data.fleetplane.workloads[namespace] (the gate's `record_key`)."""
        if self.group:
            return f"{self.resource}.{self.group}/{self.name}"
        return f"{self.resource}/{self.name}"


def workload_object_from_api(kind: str, raw: Any) -> WorkloadObject:
    """The slim view of a listed workload object of `kind` (a key of WORKLOAD_APIS);
    DecodeError naming the object and the field when one it reads has the wrong type."""
    api = WORKLOAD_APIS[kind]

    def convert() -> WorkloadObject:
        metadata, spec, _status = root_sections(raw)
        template = object_field(spec, "template", "spec")
        template_metadata = object_field(template, "metadata", "spec.template")
        template_spec = object_field(template, "spec", "spec.template")
        labels = string_map_field(template_metadata, "labels", "spec.template.metadata")
        annotations = string_map_field(template_metadata, "annotations", "spec.template.metadata")
        return identified_object(
            kind,
            api,
            metadata,
            replicas=integer_field(spec, "parallelism" if kind == "Job" else "replicas", "spec"),
            demand=pod_demand(template_spec),
            workload_type=labels.get(keys.WORKLOAD_TYPE),
            approval_id=annotations.get(keys.APPROVAL_ID),
            pod_labels=dict(labels),
        )

    return decoding(kind.lower(), raw, convert)


def identified_object(
    kind: str,
    api: tuple[str, str, str],
    metadata: Any,
    *,
    replicas: int | None = None,
    demand: dict[str, int] | None = None,
    workload_type: str | None = None,
    approval_id: str | None = None,
    pod_labels: dict[str, str] | None = None,
) -> WorkloadObject:
    """The WorkloadObject of `kind` (its `api`: group, resource, list path) with the identity
    its `metadata` gives: namespace, name, uid, creation time, controlling owner. The rest is
    what its pod template says (an operator's object has none: observe/operator_objects.py).
    DecodeError when the uid is missing or a field read has the wrong type."""
    group, resource, _ = api
    uid = string_field(metadata, "uid", "metadata")
    if not uid:
        raise DecodeError("metadata.uid: missing")
    return WorkloadObject(
        kind=kind,
        group=group,
        resource=resource,
        namespace=string_field(metadata, "namespace", "metadata"),
        name=string_field(metadata, "name", "metadata"),
        uid=uid,
        created=parse_time(string_field(metadata, "creationTimestamp", "metadata", None)) or 0.0,
        owner=controller_owner(metadata),
        replicas=replicas,
        demand=demand or {},
        workload_type=workload_type,
        approval_id=approval_id,
        pod_labels=pod_labels or {},
    )
