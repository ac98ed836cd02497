"""The disruption concern's step: each running accelerator pod's facts (decide.disruption), the
policy's answers, then `karpenter.sh/do-not-disrupt` set or cleared (act.disruption). It runs
last in the pass, so the pods the concerns before it removed are left out."""

from __future__ import annotations

from controller.act.disruption import act_on_marks, ask
from controller.concerns import PassView
from controller.decide.disruption import facts, plan_marks


def run(view: PassView) -> None:
    rt = view.rt
    judged = facts(view.snapshot.pods, rt.now, view.freed)
    act_on_marks(rt, plan_marks(ask(rt, judged)))
