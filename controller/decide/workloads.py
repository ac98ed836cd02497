"""Facts about workloads shared by the decisions: what a pod belongs to, how it is reclaimed,
whether it may be preempted, and what a team holds."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from controller.config import FleetView
from controller.decide.operator_kinds import (
    JOBSET,
    JOBSET_NAME_LABEL,
    LEADERWORKERSET,
    LWS_NAME_LABEL,
    operator_kind,
)
from controller.observe.model import Pod, family
from fleet import labels as keys

VOLCANO_JOB_API = "batch.volcano.sh/v1alpha1"
GANG_ANNOTATION = "scheduling.k8s.io/group-name"
"""The PodGroup a pod belongs to, as Volcano annotates every pod it schedules (the pods of a
Volcano Job, and those it made a PodGroup for). A PodGroup is a gang: Volcano places its
`minMember` pods together or not at all, so the controller takes or serves it whole."""


def gang_of(pod: Pod) -> tuple[str, str] | None:
    """(namespace, PodGroup name) of the pod's gang, or None when Volcano did not group it."""
    name = pod.annotations.get(GANG_ANNOTATION)
    return (pod.namespace, name) if name else None


def gangs(pods: list[Pod]) -> dict[tuple[str, str], list[Pod]]:
    """The non-terminal pods of every gang of more than one pod (a gang of one is a pod)."""
    out: dict[tuple[str, str], list[Pod]] = {}
    for pod in pods:
        key = gang_of(pod)
        if key is not None and not pod.terminal:
            out.setdefault(key, []).append(pod)
    return {key: members for key, members in out.items() if len(members) > 1}


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """The object a reclaim acts on, and how (least destructive first).

    method: `scale-to-zero` (Deployment, StatefulSet, a ReplicaSet without a Deployment),
    `suspend` (batch Job), `abort` (Volcano Job, through a bus.volcano.sh Command), `delete`
    (a bare pod), or `unsupported` (any other owner: a DaemonSet would recreate its pod).
    For an operator's kind (`decide.operator_kinds`: JobSet, LeaderWorkerSet, RayCluster; act
    climbs to a JobSet's TrainJob or a RayCluster's RayJob) the method is the kind's own:
    `suspend` (spec.suspend) or `scale-to-zero` (an LWS's spec.replicas).
    via: the owner the pod names when it is not the target (a Deployment's ReplicaSet, a
    JobSet's Job, an LWS's StatefulSet); act confirms the ownership chain.
    """

    api_version: str
    kind: str
    namespace: str
    name: str
    method: str
    via: str | None = None

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


class Judged(Protocol):
    """A pod judged for a stop, and when it was warned (None: not warned)."""

    @property
    def pod(self) -> Pod: ...

    @property
    def warned_at(self) -> float | None: ...


class StopItem(Protocol):
    """A workload to stop (idle reclaim, lifetime stop): its target and the pods judged."""

    @property
    def target(self) -> Target: ...

    @property
    def pods(self) -> Sequence[Judged]: ...


def operator_target(pod: Pod) -> Target | None:
    """The operator's object a pod belongs to, as its owner and the operator's labels name it:
    a JobSet's Job's pod (the JobSet's label), a LeaderWorkerSet's StatefulSet's pod (the LWS's
    label), a pod an operator's kind owns itself (a RayCluster's head and workers). None for
    any other pod. The labels only group the pods; act follows the owner references and acts
    only when they lead to the object named here (`act.owners`)."""
    owner = pod.owner
    if owner is None:
        return None
    via: str | None = owner.name
    if owner.kind == "Job" and owner.api_version.startswith("batch/"):
        kind, name = JOBSET, pod.labels.get(JOBSET_NAME_LABEL)
    elif owner.kind == "StatefulSet" and owner.api_version.startswith("apps/"):
        kind, name = LEADERWORKERSET, pod.labels.get(LWS_NAME_LABEL)
    elif (found := operator_kind(owner.api_version, owner.kind)) is not None:
        kind, name, via = found, owner.name, None
    else:
        return None
    if not name:
        return None
    return Target(
        api_version=kind.api_version,
        kind=kind.kind,
        namespace=pod.namespace,
        name=name,
        method=kind.method,
        via=via,
    )


def reclaim_target(pod: Pod) -> Target:
    owner = pod.owner
    ns = pod.namespace
    if owner is None:
        return Target(api_version="v1", kind="Pod", namespace=ns, name=pod.name, method="delete")
    if (operator := operator_target(pod)) is not None:
        return operator
    if owner.kind == "ReplicaSet":
        template_hash = pod.labels.get("pod-template-hash")
        if template_hash and owner.name.endswith(f"-{template_hash}"):
            return Target(
                api_version="apps/v1",
                kind="Deployment",
                namespace=ns,
                name=owner.name[: -len(template_hash) - 1],
                method="scale-to-zero",
                via=owner.name,
            )
        return Target(
            api_version="apps/v1",
            kind="ReplicaSet",
            namespace=ns,
            name=owner.name,
            method="scale-to-zero",
        )
    if owner.kind == "StatefulSet":
        return Target(
            api_version="apps/v1",
            kind="StatefulSet",
            namespace=ns,
            name=owner.name,
            method="scale-to-zero",
        )
    if owner.kind == "Job" and owner.api_version.startswith("batch/"):
        return Target(
            api_version="batch/v1", kind="Job", namespace=ns, name=owner.name, method="suspend"
        )
    if owner.kind == "Job" and owner.api_version == VOLCANO_JOB_API:
        return Target(
            api_version=VOLCANO_JOB_API,
            kind="VolcanoJob",
            namespace=ns,
            name=owner.name,
            method="abort",
        )
    return Target(
        api_version=owner.api_version,
        kind=owner.kind,
        namespace=ns,
        name=owner.name,
        method="unsupported",
    )


def preemptible(pod: Pod, fleet: FleetView) -> bool:
    """The `fleetplane.dev/preemptible` label wins; else the workload type's default; a pod
    without a known type is not preemptible."""
    label = pod.labels.get(keys.PREEMPTIBLE)
    if label in ("true", "false"):
        return label == "true"
    wt = fleet.workload_types.get(pod.workload_type or "")
    return bool(wt and wt.preemptible)


def families(pod: Pod) -> dict[str, int]:
    """Devices per family (MIG devices count as GPUs)."""
    out: dict[str, int] = {}
    for resource, n in pod.demand.items():
        out[family(resource)] = out.get(family(resource), 0) + n
    return out


def team_usage(
    pods: list[Pod], fleet: FleetView, *, freeing: frozenset[str] | set[str] = frozenset()
) -> dict[str, dict[str, int]]:
    """Devices per family held by each team's scheduled, non-terminal pods. Pods already being
    deleted (deletionTimestamp set) and those this pass removes (`freeing`, uids) are not
    counted: their devices already count as free, so counting them as still held would let a
    guarantee check pass on devices the team is about to lose."""
    usage: dict[str, dict[str, int]] = {}
    for pod in pods:
        if not pod.node_name or pod.terminal or pod.deleting or pod.uid in freeing:
            continue
        team = fleet.namespaces.get(pod.namespace)
        if team is None:
            continue
        held = usage.setdefault(team, {})
        for fam, n in families(pod).items():
            held[fam] = held.get(fam, 0) + n
    return usage


def annotation_number(pod: Pod, key: str) -> float | None:
    value = pod.annotations.get(key)
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


class HasVerdict(Protocol):
    """Anything a concern's plan judged: it has a verdict."""

    @property
    def verdict(self) -> StrEnum: ...


def verdict_counts(judgements: Iterable[HasVerdict]) -> dict[str, int]:
    """How many judgements have each verdict (a plan's `counts()`, for the summary's gauges)."""
    return dict(Counter(j.verdict.value for j in judgements))
