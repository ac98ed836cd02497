"""The disruption concern's step: each running accelerator pod's facts (decide.disruption), the
policy's answers for the pods whose answer may have changed since the answers the last pass
kept (decide.disruption_memo, act.disruption_memo), then `karpenter.sh/do-not-disrupt` set or
cleared (act.disruption), and the answers kept for the next pass. It runs last in the pass, so
the pods the concerns before it removed are left out."""

from __future__ import annotations

from controller.act.disruption import act_on_marks, ask
from controller.act.disruption_memo import read_kept, write_kept
from controller.act.runtime import Runtime
from controller.concerns import PassView
from controller.decide.disruption import facts, plan_marks
from controller.decide.disruption_memo import keep, split
from controller.errors import ControllerError


def run(view: PassView) -> None:
    rt = view.rt
    judged = facts(view.snapshot.pods, rt.now, view.freed)
    kept, held = read_kept(rt)
    revision = _revision(rt)
    plan = split(judged, kept, revision, rt.now)
    if rt.log.debugging():  # a line per pod: tens of thousands a pass at fleet scale
        for pod, _ in plan.ask:
            rt.log.debug("disruption.ask", pod=pod.key)
    answers = ask(rt, plan.ask)
    marks = plan_marks(answers)
    act_on_marks(rt, marks)
    written = write_kept(rt, keep(plan, answers, marks, revision, rt.now), held)
    rt.summary.set("disruption_answers", len(plan.ask), source="asked")
    rt.summary.set("disruption_answers", len(plan.held), source="kept")
    rt.log.info(
        "disruption.asked",
        judged=len(judged),
        asked=len(plan.ask),
        held=len(plan.held),
        revision=revision,
        kept_parts_written=written,
    )


def _revision(rt: Runtime) -> str | None:
    """The revision OPA's answers name now; None (ask about every pod, keep nothing) when it
    has none or cannot say."""
    try:
        return rt.opa.revision()
    except ControllerError as error:
        rt.log.warning("disruption.revision.unknown", error=str(error), consequence="ask all")
        return None
