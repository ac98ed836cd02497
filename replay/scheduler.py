"""The replay's model of the Kubernetes scheduler with Volcano's queues: which pending pod goes
first, and onto which node.

Pending pods are served by priority, then arrival (`fifo`), or by priority, then the team's
GPUs in use per unit of queue weight, then arrival (`fair-share`, Volcano's proportion plugin
in spirit). A pod goes to the fullest ready node it fits on (GPU packing): its GPUs (whole, or its share of one on a
time-sliced pool), CPU and memory, on a model it accepts. A team holding its
quota waits (Volcano queue capability). The scheduler never preempts: every preemption is the
controller's.
"""

from __future__ import annotations

from typing import Any

from replay.fleet import FleetState
from replay.objects import Job, SimNode


class Scheduler:
    def __init__(self, fleet: FleetState) -> None:
        self.fleet = fleet
        teams = fleet.scenario.fleet.teams
        self.queueing = fleet.scenario.queueing
        self.quota = {t.name: t.quota.get("nvidia.com/gpu", 0) for t in teams}
        self.weight = {t.name: t.queue_weight for t in teams}

    def queue_key(self, job: Job) -> tuple[Any, ...]:
        since = job.pending_since or 0.0
        if self.queueing == "fair-share":
            share = self.fleet.team_gpus.get(job.team, 0) / max(1, self.weight.get(job.team, 1))
            return (-job.priority, share, since, job.workload.index)
        return (-job.priority, since, job.workload.index)

    def schedule(self, at: float) -> list[Job]:
        """Start what fits now; the pods that fit no ready node (for the autoscaler)."""
        fleet = self.fleet
        if not fleet.pending:
            return []
        unplaced: list[Job] = []
        for job in sorted(fleet.pending.values(), key=self.queue_key):
            if fleet.team_gpus.get(job.team, 0) + job.gpus > self.quota.get(job.team, 0):
                job.quota_blocked = True
                continue
            job.quota_blocked = False
            found = self.best_node(job)
            if found is None:
                unplaced.append(job)
            else:
                fleet.start(job, found[0], found[1], at)
        return unplaced

    def best_node(self, job: Job) -> tuple[SimNode, tuple[int, ...]] | None:
        """The ready node with the fewest free milli-GPUs that holds the job (GPUs, CPU,
        memory; then by name), and the GPUs it would take there."""
        best: tuple[SimNode, tuple[int, ...]] | None = None
        best_key: tuple[int, str] | None = None
        for pool in self.fleet.compatible_pools(job):
            for node in self.fleet.live[pool.name]:
                if not node.ready:
                    continue
                key = (node.free_milli, node.name)
                if best_key is not None and key >= best_key:
                    continue
                slots = node.gpus_for(job)
                if slots is not None:
                    best, best_key = (node, slots), key
        return best
