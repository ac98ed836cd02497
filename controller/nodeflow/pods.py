"""The one pod view of the node workflows: what draining, restarting and validating need of a
pod (its role and why it uses the GPU, its checkpoint, its gang, its validator attempt and
verdict), slimmed from the API's JSON; and the checks on it that every workflow shares.

Why this is not `controller.observe.model.Pod`: that is the pass's decoder of a pod's demand
(the catalog's resource names, priority, placement, lifetime), strict on types, and the one
source of what a pod holds; this view adds what only a node workflow can say of a pod, relative
to its settings (driver pods recognised by `driver_namespace` and `driver_selector`, the
validator's attempt and verdict, the GPU use of a pod without a request). Where a workflow needs
what a pod holds (remediation's cost of an eviction), it decodes the pod with observe's decoder
and carries `devices` and `started` from there (`remediation.observe.work_pod`); nothing of a
pod is decoded twice in two ways.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from controller.nodeflow.consumers import LabelSelector, Role, controller_kind, pod_role, uses_gpu
from controller.nodeflow.keys import GANG_ANNOTATION, VALIDATOR_ATTEMPT_LABEL
from controller.observe.model import DisruptionBudget, selector_matches
from fleet import labels as keys


@dataclass(frozen=True, kw_only=True)
class Terminated:
    exit_code: int
    message: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class PodView:
    namespace: str
    name: str
    uid: str
    labels: dict[str, str]
    role: Role
    owner_kind: str | None
    phase: str
    deleting: bool
    ready: bool
    gpu: str | None
    """Why the pod counts as using the GPU; None when it does not (or its role never blocks)."""
    last_checkpoint: float | None
    """`fleetplane.dev/last-checkpoint` as a number, unchecked: use `checkpoint_at`."""
    attempt: int | None
    """Validator pods: the attempt they belong to."""
    terminated: Terminated | None
    """First container's terminated state, if it has one."""
    checkpoint_text: str | None = None
    """The annotation as written, to name it when it is malformed."""
    gang: str | None = None
    """The Volcano PodGroup it belongs to (`scheduling.k8s.io/group-name`), if any."""
    node: str | None = None
    """`spec.nodeName`."""
    devices: int = 0
    """Accelerators the pod holds (`observe.model.Pod.devices`); filled where a workflow
    records the work an eviction costs."""
    started: float | None = None
    """When the pod started (`observe.model.Pod.started`); filled likewise."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def active(self) -> bool:
        return self.phase not in ("Succeeded", "Failed")

    @property
    def terminal(self) -> bool:
        return not self.active


def pod_view(
    raw: dict[str, Any], *, driver_namespace: str, driver_selector: LabelSelector
) -> PodView:
    metadata = raw.get("metadata") or {}
    status = raw.get("status") or {}
    role = pod_role(raw, driver_namespace=driver_namespace, driver_selector=driver_selector)
    annotations = metadata.get("annotations") or {}
    labels = metadata.get("labels") or {}
    checkpoint_text = annotations.get(keys.LAST_CHECKPOINT)
    try:
        checkpoint = float(checkpoint_text) if checkpoint_text is not None else None
    except (TypeError, ValueError):
        checkpoint = None
    terminated = None
    container_statuses = status.get("containerStatuses") or ()
    if container_statuses:
        state = (container_statuses[0].get("state") or {}).get("terminated")
        if isinstance(state, dict):
            terminated = Terminated(
                exit_code=code if isinstance(code := state.get("exitCode"), int) else -1,
                message=str(state.get("message") or ""),
                reason=str(state.get("reason") or ""),
            )
    attempt_text = labels.get(VALIDATOR_ATTEMPT_LABEL)
    return PodView(
        namespace=metadata.get("namespace", ""),
        name=metadata.get("name", ""),
        uid=metadata.get("uid", ""),
        labels=labels,
        role=role,
        owner_kind=controller_kind(metadata),
        phase=status.get("phase") or "Pending",
        deleting=bool(metadata.get("deletionTimestamp")),
        ready=any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or ()
        ),
        gpu=uses_gpu(raw, role),
        last_checkpoint=checkpoint,
        attempt=int(attempt_text) if attempt_text and attempt_text.isdigit() else None,
        terminated=terminated,
        checkpoint_text=None if checkpoint_text is None else str(checkpoint_text),
        gang=annotations.get(GANG_ANNOTATION) or None,
        node=(raw.get("spec") or {}).get("nodeName") or None,
    )


def checkpoint_problem(pod: PodView, now: float) -> str | None:
    """What is wrong with the pod's `fleetplane.dev/last-checkpoint` at `now`; None when it is
    absent or a plausible time: epoch seconds, finite, after 1970 and not in the future (a value
    in milliseconds, "inf" or a clock ahead of ours would otherwise read as "just checkpointed")."""
    if pod.checkpoint_text is None:
        return None
    at = pod.last_checkpoint
    if at is None or not math.isfinite(at):
        return "not a finite number of epoch seconds"
    if at <= 0:
        return "not after 1970"
    if at > now:
        return f"{at - now:.0f}s in the future (epoch seconds expected)"
    return None


def checkpoint_at(pod: PodView, now: float) -> float | None:
    """When the pod last checkpointed, if its annotation is trustworthy at `now`; a malformed
    or future one counts as no checkpoint at all."""
    return None if checkpoint_problem(pod, now) is not None else pod.last_checkpoint


def pdb_blocking(pdbs: list[DisruptionBudget], pod: PodView) -> DisruptionBudget | None:
    """A budget that selects the pod and allows no disruption right now."""
    for pdb in pdbs:
        if (
            pdb.namespace == pod.namespace
            and pdb.disruptions_allowed <= 0
            and selector_matches(pdb.selector, pod.labels)
        ):
            return pdb
    return None
