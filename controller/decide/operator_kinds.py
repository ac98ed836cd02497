"""The workload operators' kinds the controller stops through their own APIs (issue 30): a
TrainJob, a JobSet, a RayJob, a RayCluster or a LeaderWorkerSet is stopped whole, never through
a child its operator would recreate (a JobSet's Job, a RayCluster's pod, an LWS's StatefulSet).

How each is stopped, read in the pinned releases (docs/operators.md):

- JobSet (`sigs.k8s.io/jobset` v0.10.1): `spec.suspend: true` suspends every child Job, whose
  pods the Job controller deletes; a JobSet the Trainer made is its TrainJob's (below).
- TrainJob (Kubeflow Trainer v2.1.0): `spec.suspend: true`; the Trainer copies it onto its
  JobSet. Suspending the JobSet alone does not hold: the Trainer applies the TrainJob's
  `suspend` again whenever either is suspended (`pkg/runtime/framework/plugins/jobset`).
- RayCluster (KubeRay v1.5.0): `spec.suspend: true` deletes the head and every worker (the
  RayClusterSuspending then Suspended conditions); a cluster a RayJob made is its RayJob's.
- RayJob: `spec.suspend: true` deletes its RayCluster and submitter (status Suspending, then
  Suspended). KubeRay refuses the flag on a RayJob without `shutdownAfterJobFinishes: true` or
  in ClusterSelector mode (`utils.ValidateRayJobSpec` fails the RayJob): those are not stopped.
- LeaderWorkerSet (`sigs.k8s.io/lws` v0.7.0): no suspend; `spec.replicas` (its `scale`
  subresource) to 0 deletes every group (leader pod and its workers' StatefulSet).

A pod names the first of these through its owner and the operators' labels (`operator_target`);
the act side climbs the controlling owners from there through the API, confirming each uid, to
the object at the top (a JobSet's TrainJob, a RayCluster's RayJob) and stops that.
"""

from __future__ import annotations

from dataclasses import dataclass

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
"""Set by JobSet on every Job and pod it creates (the JobSet's name)."""
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
"""Set by LeaderWorkerSet on its StatefulSets and every pod (the LeaderWorkerSet's name)."""
LWS_GROUP_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
"""The group (leader and its workers) a LeaderWorkerSet pod belongs to, 0..replicas-1."""


@dataclass(frozen=True, slots=True)
class OperatorKind:
    """An operator's kind: how the API serves it and how it is stopped (`suspend`: spec.suspend
    to true; `scale-to-zero`: spec.replicas to 0)."""

    api_version: str
    kind: str
    plural: str
    method: str

    @property
    def group(self) -> str:
        return self.api_version.split("/", 1)[0]


JOBSET = OperatorKind("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets", "suspend")
TRAINJOB = OperatorKind("trainer.kubeflow.org/v1alpha1", "TrainJob", "trainjobs", "suspend")
RAYCLUSTER = OperatorKind("ray.io/v1", "RayCluster", "rayclusters", "suspend")
RAYJOB = OperatorKind("ray.io/v1", "RayJob", "rayjobs", "suspend")
LEADERWORKERSET = OperatorKind(
    "leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "leaderworkersets", "scale-to-zero"
)

OPERATOR_KINDS: dict[tuple[str, str], OperatorKind] = {
    (k.group, k.kind): k for k in (JOBSET, TRAINJOB, RAYCLUSTER, RAYJOB, LEADERWORKERSET)
}
"""(API group, kind) -> the operator kind; the groups as the fleet configuration's built-in
operators name them (fleet/config/operators.py)."""


def operator_kind(api_version: str, kind: str) -> OperatorKind | None:
    """The operator kind an owner reference names (any version of its group), or None."""
    return OPERATOR_KINDS.get((api_version.split("/", 1)[0], kind))
