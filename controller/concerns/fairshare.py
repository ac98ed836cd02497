"""Fair share's step: the teams' Volcano Queues (weight, reclaimable, guarantee) read at the
start of the step, who is under and over its deserved share on the pass's snapshot
(decide.fairshare), the victims evicted (act.fairshare). The pods the concerns before it
removed count as already freed; the pods it removes are returned for priority preemption,
which runs after it."""

from __future__ import annotations

from controller.act.fairshare import act_on_fair_share
from controller.concerns import PassView
from controller.decide.fairshare import (
    QueueShare,
    plan_fair_share,
    queue_from_api,
    waits_for_accelerators,
)
from controller.errors import NotFoundError
from controller.observe.kube import KubeClient

QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"


def read_queues(kube: KubeClient) -> dict[str, QueueShare] | None:
    """The Volcano Queues by name; None when Volcano's API is not served."""
    try:
        found = [queue_from_api(raw) for raw in kube.list(QUEUES, limit=500)]
    except NotFoundError:
        return None
    return {queue.name: queue for queue in found if queue is not None}


def run(view: PassView) -> set[str]:
    rt, snapshot = view.rt, view.snapshot
    if not any(waits_for_accelerators(pod) for pod in snapshot.pods):
        return set()  # nobody waits: no share to take back, no need to read the queues
    queues = read_queues(rt.kube)
    if queues is None:
        rt.log.info("fairshare.skipped", reason=f"{QUEUES} is not served: no Volcano")
        return set()
    plan = plan_fair_share(
        snapshot.pods,
        snapshot.nodes,
        snapshot.pdbs,
        rt.fleet,
        queues,
        snapshot.priority_of,
        rt.now,
        pending_seconds=rt.settings.preemption_pending_seconds,
        group_phases={
            (o.namespace, o.name): o.phase for o in snapshot.volcano if o.kind == "PodGroup"
        },
        min_members=snapshot.min_members(),
        freeing=view.freed,
    )
    return act_on_fair_share(rt, plan)
