"""Priority preemption's step: victims for workloads kept waiting (decide.preempt), evicted
(act.preempt); the pods the concerns before it removed in this pass count as already freed."""

from __future__ import annotations

from controller.act.preempt import act_on_preemption
from controller.concerns import PassView
from controller.decide.preempt import plan_preemption


def run(view: PassView) -> None:
    rt, snapshot = view.rt, view.snapshot
    plan = plan_preemption(
        snapshot.pods,
        snapshot.nodes,
        snapshot.pdbs,
        rt.fleet,
        snapshot.priority_of,
        rt.now,
        pending_seconds=rt.settings.preemption_pending_seconds,
        freeing=view.freed,
        min_members=snapshot.min_members(),
    )
    act_on_preemption(rt, plan, snapshot.pods, view.freed)
