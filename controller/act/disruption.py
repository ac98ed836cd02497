"""Writing the disruption marks: `karpenter.sh/do-not-disrupt` set or cleared on the pod judged.

Each pod's policy answer is asked first (`fleetplane/decisions/disruption`); an error leaves
that pod as it is (no answer: nothing is unprotected on missing evidence). Each mark is a merge
patch of the pod's annotations on the version judged (`pod_annotate`: never on a pod recreated
under the same name; after a conflict, not when the fresh pod no longer wants the change), then
a Normal Event on the pod (`DisruptionProtected`, `DisruptionUnprotected`) whose message is the
policy's reasons. Under --dry-run each mark is shown instead. The actions counter of the concern
(`protect`, `unprotect`) counts them; `fleetplane_controller_actions{concern="disruption"}`.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from controller.act.events import ObjectRef
from controller.act.pod_annotate import annotate_judged_pod
from controller.act.runtime import Runtime
from controller.decide.disruption import (
    DO_NOT_DISRUPT,
    OWNER,
    PROTECTED_BY,
    Change,
    Mark,
    annotations_for,
)
from controller.decide.disruption_memo import Timed
from controller.errors import ControllerError, PermanentError
from controller.observe.model import Pod

CONCERN = "disruption"
DECISION = "disruption"

EVENT_REASONS = {Change.PROTECT: "DisruptionProtected", Change.UNPROTECT: "DisruptionUnprotected"}


BATCH = 100
"""Pods asked about in one request (`Opa.decide_each`). One request per pod cost a pass of
20,000 running pods 75 s and OPA 18-20 CPU-s, mostly HTTP; batched, OPA spends about 0.3 ms a
pod evaluating. A batch of 100 is about 30 ms of OPA's CPU, so a request stays far inside the
request timeout on a starved machine (batches of 500 timed out at load 19, several in
parallel), and its overhead is still a small share."""


def ask(rt: Runtime, judged: list[tuple[Pod, dict[str, Any]]]) -> list[tuple[Pod, Timed | None]]:
    """The policy's answer per pod, asked `BATCH` pods a request; None for a pod it could not
    answer (the request failed, or its answer is missing or malformed: logged, counted)."""

    def batch(items: list[tuple[Pod, dict[str, Any]]]) -> list[tuple[Pod, Timed | None]]:
        failed: ControllerError | None = None
        found: dict[str, Timed] = {}
        try:
            found = dict(
                rt.opa.decide_each(DECISION, {str(i): f for i, (_, f) in enumerate(items)})
            )
        except ControllerError as error:
            failed = error
        out: list[tuple[Pod, Timed | None]] = []
        for i, (pod, _) in enumerate(items):
            answer = found.get(str(i))
            if answer is None:
                rt.report(
                    CONCERN,
                    "disruption.decision.failed",
                    failed or PermanentError("no decision for the pod in the policy's answer"),
                    pod=pod.key,
                    consequence="left as it is: nothing is unprotected without an answer",
                )
            out.append((pod, answer))
        return out

    batches = [judged[i : i + BATCH] for i in range(0, len(judged), BATCH)]
    return [answer for answers in rt.each(batches, batch) for answer in answers]


def act_on_marks(rt: Runtime, marks: list[Mark]) -> None:
    for mark in marks:
        rt.guarded(CONCERN, mark.change.value, mark.pod.key, partial(_write, rt, mark))


def _write(rt: Runtime, mark: Mark) -> None:
    pod, change = mark.pod, mark.change
    told = (
        f"{DO_NOT_DISRUPT}=true set by the controller: {mark.reason}"
        if change is Change.PROTECT
        else f"{DO_NOT_DISRUPT} cleared by the controller: {mark.reason}"
    )
    if rt.dry_run:
        rt.would(CONCERN, change.value, pod.key, told, node=pod.node_name)
        return

    def unwanted(current: dict[str, str]) -> bool:
        if change is Change.UNPROTECT:
            return current.get(PROTECTED_BY) != OWNER
        # Someone else protected it meanwhile: theirs, left alone.
        return current.get(DO_NOT_DISRUPT) == "true" and current.get(PROTECTED_BY) != OWNER

    written = annotate_judged_pod(rt, pod, annotations_for(mark), unwanted=unwanted)
    if not written.written:
        rt.log.info(
            f"{CONCERN}.{change.value}.skipped",
            pod=pod.key,
            outcome=written.outcome.value,
            reason="gone, replaced, or no longer wanted on the pod as it is now",
        )
        rt.summary.action(CONCERN, change.value, written.outcome.value)
        return
    rt.events.emit(
        ObjectRef(
            api_version="v1", kind="Pod", namespace=pod.namespace, name=pod.name, uid=pod.uid
        ),
        EVENT_REASONS[change],
        told,
    )
    rt.done(CONCERN, change.value, pod.key, mark.reason, node=pod.node_name)
