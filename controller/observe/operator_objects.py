"""The operators' objects a pod's chain of owners climbs through to the workload its user
wrote: a JobSet (a TrainJob's: Pod -> Job -> JobSet -> TrainJob) and a RayCluster (a RayJob's:
Pod -> RayCluster -> RayJob).

A pass lists them beside the workload objects (`workload_objects`), slimmed to identity and
controlling owner, so that `decide.lineage` keeps a TrainJob's records under the TrainJob and a
RayJob's under the RayJob, not under the JobSet or RayCluster the operator made: the chain goes
on through an observed object only when it is the one the child's reference names (kind, name
and uid). A kind whose API is not served (its operator is not installed) is noted as missing
and its objects are simply not there: the chain then stops at the first owner not observed, as
before. They carry no template of their own (their pods' demand is judged on the top).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from controller.errors import NotFoundError
from controller.observe.json_fields import decoding, root_sections
from controller.observe.kube import KubeClient
from controller.observe.workload_objects import WorkloadObject, identified_object

OPERATOR_LINK_APIS = {
    "JobSet": ("jobset.x-k8s.io", "jobsets", "/apis/jobset.x-k8s.io/v1alpha2/jobsets"),
    "RayCluster": ("ray.io", "rayclusters", "/apis/ray.io/v1/rayclusters"),
}
"""kind -> (API group, resource, list path) of the operators' objects that another operator's
object may own (decide.operator_kinds names how each is stopped)."""


def operator_object_from_api(kind: str, raw: Any) -> WorkloadObject:
    """The slim view of a listed JobSet or RayCluster (a key of OPERATOR_LINK_APIS)."""
    api = OPERATOR_LINK_APIS[kind]
    return decoding(kind.lower(), raw, lambda: identified_object(kind, api, root_sections(raw)[0]))


def list_operator_objects(kube: KubeClient, page: int, missing: list[str]) -> list[WorkloadObject]:
    """Every JobSet and RayCluster; the path of a kind not served is added to `missing`."""
    found: list[WorkloadObject] = []
    for kind, (_, _, path) in OPERATOR_LINK_APIS.items():
        try:
            found.extend(
                kube.list_objects(path, partial(operator_object_from_api, kind), limit=page)
            )
        except NotFoundError:
            missing.append(path)
    return found
