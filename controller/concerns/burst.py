"""Bursting's step: the teams' Volcano Queues (their open tier) read at the start of the step,
the plan on the pass's snapshot (decide.burst: admit waiting work to the open tiers, ask for the
next one, close a tier no longer used), then the policy asked and the writes made (act.burst).
Work waits `controller.preemption_pending_seconds` (as long as it waits before it may preempt)
before it may burst, and as long again after each opening before the next tier is asked for.
It removes no pod."""

from __future__ import annotations

from controller.act.burst import QUEUES, act_on_bursts, read_queue_annotations
from controller.concerns import PassView
from controller.decide.burst import plan_bursts


def run(view: PassView) -> None:
    rt, snapshot = view.rt, view.snapshot
    queues = read_queue_annotations(rt)
    if queues is None:
        rt.log.info("burst.skipped", reason=f"{QUEUES} is not served: no Volcano")
        return
    plan = plan_bursts(
        [pod for pod in snapshot.pods if pod.uid not in view.freed],
        snapshot.nodes.values(),
        rt.fleet,
        queues,
        rt.now,
        wait_seconds=rt.settings.preemption_pending_seconds,
    )
    act_on_bursts(rt, plan)
