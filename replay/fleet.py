"""The simulated fleet's state: the nodes standing in each pool, the pods pending, running and
terminating, each team's GPUs in use, and what changes them: a pod starting, stopping,
finishing, being evicted (preempted), reclaimed or interrupted with its node.

The scheduler, the autoscaler and the controller's pass all act on this one state; the engine
owns the clock and the admission gate, and is told of every pod to submit again through
`resubmit`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from controller.decide.preempt import fits
from controller.observe.model import Node, Pod
from replay.accounting import Accounting, Counters, StandingGpus
from replay.events import COMPLETE, EMPTY_CHECK, RELEASE, EventQueue
from replay.objects import (
    TERMINATION_GRACE_SECONDS,
    Ghost,
    Job,
    PoolSpec,
    SimNode,
    State,
    pool_specs,
)
from replay.scenarios import Scenario
from replay.settings import Settings

Resubmit = Callable[[Job, float, float | None], None]
"""Submit a new pod for the job at a trace time, continuing from a progress (or from where
it stopped, for None)."""


class FleetState:
    """Nodes and pods of one scenario's simulated fleet."""

    def __init__(
        self,
        scenario: Scenario,
        settings: Settings,
        jobs: list[Job],
        *,
        horizon: float,
        events: EventQueue,
        accounting: Accounting,
        resubmit: Resubmit,
    ) -> None:
        self.scenario = scenario
        self.settings = settings
        self.epoch = settings.epoch
        self.horizon = horizon
        self.events = events
        self.accounting = accounting
        self.resubmit = resubmit
        self.pools = pool_specs(scenario)
        self.live: dict[str, list[SimNode]] = {p.name: [] for p in self.pools}
        self.nodes: list[SimNode] = []
        """Every node ever requested, removed ones too."""
        self.pending: dict[int, Job] = {}
        self.running: dict[int, Job] = {}
        self.ghosts: list[Ghost] = []
        self.team_gpus: dict[str, int] = {t.name: 0 for t in scenario.fleet.teams}
        self._compatible: dict[tuple[Any, ...], list[PoolSpec]] = {}
        self.on_node_lost: Callable[[SimNode, float], None] | None = None
        """Told of a node taken away before its pods are (the engine sets it to the CPU-only
        pods' `CpuWork.lose_node`)."""
        self._ready_views: dict[str, Node] | None = None
        self._standing_gpus: StandingGpus | None = None
        """Both derived from the standing nodes, asked every period; forgotten when a node is
        added, becomes ready or is removed (`_nodes_changed`). With the standing GPUs kept, the
        series sample of `fixed` on a quarter of the trace went from 1.3 to 0.7 s."""

    @property
    def counters(self) -> Counters:
        return self.accounting.counters

    def in_window(self, at: float) -> bool:
        return self.accounting.in_window(at)

    def compatible_pools(self, job: Job) -> list[PoolSpec]:
        """The pools the job's pods can land on, cheapest first, judged by the decision code's
        own predicate (`decide.preempt.fits`: selector, affinity, taints, GPUs per node); the
        same for every job that asks the same of them."""
        key = job.pool_key
        if key is None:
            spec = job.template["spec"]
            key = job.pool_key = (
                job.capacity,
                job.gpus,
                tuple(sorted(spec["nodeSelector"].items())),
                repr(spec.get("affinity")),
            )
        found = self._compatible.get(key)
        if found is None:
            pod = job.view(0.0, self.epoch)
            job.invalidate()
            fitting = [p for p in self.pools if fits(pod, p.node_view(f"{p.name}-probe"))]
            found = sorted(fitting, key=lambda p: (p.price_per_gpu_hour, p.name))
            self._compatible[key] = found
        return found

    def standing(self) -> Iterator[SimNode]:
        """Nodes requested and not removed, pool by pool."""
        for pool in self.pools:
            yield from self.live[pool.name]

    def ready_views(self) -> dict[str, Node]:
        """The views of the ready nodes by name, pool by pool (the controller's snapshot)."""
        if self._ready_views is None:
            self._ready_views = {n.name: n.view for n in self.standing() if n.ready}
        return self._ready_views

    def standing_gpus(self) -> StandingGpus:
        if self._standing_gpus is None:
            self._standing_gpus = StandingGpus.of(self.standing())
        return self._standing_gpus

    # ------------------------------------------------------------------ nodes

    def _nodes_changed(self) -> None:
        self._ready_views = None
        self._standing_gpus = None

    def add_node(self, node: SimNode) -> None:
        self.live[node.pool.name].append(node)
        self.nodes.append(node)
        self._nodes_changed()

    def node_ready(self, node: SimNode) -> None:
        node.ready = True
        self._nodes_changed()

    def remove_node(self, node: SimNode, at: float) -> None:
        """The node is gone (scaled down or interrupted): its bill ends."""
        node.gone_at = at
        node.ready = False
        self.live[node.pool.name].remove(node)
        self._nodes_changed()
        self.accounting.account_node(node, at)
        if self.in_window(at):
            self.counters.nodes_removed += 1

    # ------------------------------------------------------------------ pods

    def start(self, job: Job, node: SimNode, slots: tuple[int, ...], at: float) -> None:
        """Run the job on the node, holding `slots` (its GPUs there, `SimNode.gpus_for`)."""
        del self.pending[job.workload.index]
        self.running[job.workload.index] = job
        job.slots = slots
        job.held_milli = node.take(job, slots)
        node.jobs.append(job)
        node.empty_since = None
        self.team_gpus[job.team] = self.team_gpus.get(job.team, 0) + job.gpus
        job.state = State.RUNNING
        job.node = node
        job.run_start = at
        job.pending_since = None
        if job.first_start is None:
            job.first_start = at
            job.first_model = node.pool.config.model
            job.first_slots = slots
        job.invalidate()
        remaining = job.workload.work_seconds - job.progress
        self.events.push(at + max(0.0, remaining), COMPLETE, (job, job.attempt))

    def stop(self, job: Job, at: float, *, hold: bool) -> float:
        """End the job's run at `at`: account its busy time; its GPUs are released now, or
        held by a ghost for the grace period (`hold`). Returns its progress."""
        node = job.node
        assert node is not None and job.run_start is not None
        progress = job.progress_at(at)
        self.accounting.account_run(job, job.run_start, at)
        del self.running[job.workload.index]
        node.jobs.remove(job)
        if hold:
            view = job.view(at, self.epoch)
            ghost = Ghost(
                view=_deleting(view),
                node=node,
                gpus=job.gpus,
                team=job.team,
                hold_start=job.run_start,
                release_at=at + TERMINATION_GRACE_SECONDS,
                slots=job.slots,
                held_milli=job.held_milli,
                cpu_milli=job.cpu_milli,
                memory_mib=job.memory_mib,
            )
            node.ghosts.append(ghost)
            self.ghosts.append(ghost)
            self.events.push(ghost.release_at, RELEASE, ghost)
        else:
            self.free(node, job, job.run_start, at)
        job.node = None
        job.run_start = None
        job.progress = progress
        job.invalidate()
        return progress

    def free(self, node: SimNode, holder: Job | Ghost, since: float, at: float) -> None:
        """What a pod (or a terminating one) held since `since` is free at `at`; a node left
        empty is checked for scale down after `scale_down_seconds`."""
        self.accounting.account_allocation(holder.held, since, at)
        self.team_gpus[holder.team] = self.team_gpus.get(holder.team, 0) - holder.gpus
        if node.gone_at is None:
            node.give_back(holder.slots, holder.held_milli, holder.cpu_milli, holder.memory_mib)
            if node.empty:
                node.empty_since = at
                self.events.push(at + self.settings.scale_down_seconds, EMPTY_CHECK, (node, at))

    def release(self, ghost: Ghost, at: float) -> bool:
        """The grace period of a terminating pod is over; False if its node went first."""
        if ghost not in ghost.node.ghosts:
            return False  # its node went away with it
        ghost.node.ghosts.remove(ghost)
        self.ghosts.remove(ghost)
        self.free(ghost.node, ghost, ghost.hold_start, at)
        return True

    def complete(self, job: Job, attempt: int, at: float) -> bool:
        """The job's work is done, if this attempt is still the one running."""
        if job.state is not State.RUNNING or job.attempt != attempt:
            return False
        self.stop(job, at, hold=False)
        job.state = State.DONE
        job.finished_at = at
        return True

    # ------------------------------------------------------------------ disruptions

    def lose_progress(self, job: Job, at: float) -> float:
        """Stop a running job that will start again from its last checkpoint (or from zero);
        returns the progress lost."""
        reached = job.checkpoint_at(at)
        progress = job.progress_at(at)
        job.checkpoint = reached if job.workload.checkpoint_seconds else 0.0
        return max(0.0, progress - job.checkpoint)

    def evict(self, job: Job, at: float) -> None:
        """Preempted by the controller: evicted with the grace period, resubmitted at once."""
        lost = self.lose_progress(job, at)
        restart = job.checkpoint
        self.stop(job, at, hold=True)
        job.preempted += 1
        job.lost_seconds += lost
        c = self.counters
        if self.in_window(at):
            c.preemptions += 1
            c.preempt_lost_gpu_seconds += lost * job.held
            kind = job.workload_type
            c.preempted_by_type[kind] = c.preempted_by_type.get(kind, 0) + 1
        self.check_harm(job, "preempted")
        self.resubmit(job, at, restart)

    def reclaim(self, job: Job, at: float) -> None:
        """Reclaimed while idle: the pod is deleted; the owner comes back when its profile
        turns busy again (continuing from there), or never."""
        progress = self.stop(job, at, hold=True)
        job.reclaimed += 1
        profile = job.workload.profile
        back = profile.next_busy(progress)
        self.check_harm(job, "reclaimed")
        c = self.counters
        if back is None:
            saved_until = at + (profile.duration - progress)
            job.state = State.RECLAIMED
            job.finished_at = at
        else:
            saved_until = at + (back - progress)
        if self.in_window(at):
            c.reclaims += 1
            c.reclaimed_gpu_seconds += job.held * self.accounting.overlap(at, saved_until)
        if back is not None:
            if saved_until <= self.horizon:
                c.reclaims_resumed += 1 if self.in_window(at) else 0
                job.checkpoint = back if job.workload.checkpoint_seconds else job.checkpoint
                self.resubmit(job, saved_until, back)
            else:
                job.state = State.RECLAIMED
                job.finished_at = at

    def interrupt_pods(self, node: SimNode, at: float) -> None:
        """The node is taken away (spot): terminating pods go with it, running pods lose the
        progress since their last checkpoint and are submitted again at once."""
        c = self.counters
        counted = self.in_window(at)
        if self.on_node_lost is not None:
            self.on_node_lost(node, at)
        for ghost in list(node.ghosts):
            node.ghosts.remove(ghost)
            self.ghosts.remove(ghost)
            self.free(node, ghost, ghost.hold_start, at)
        for job in list(node.jobs):
            lost = self.lose_progress(job, at)
            restart = job.checkpoint
            self.stop(job, at, hold=False)
            job.interrupted += 1
            job.lost_seconds += lost
            if counted:
                c.spot_pods_interrupted += 1
                c.spot_lost_gpu_seconds += lost * job.held
            self.check_harm(job, "interrupted on spot")
            self.resubmit(job, at, restart)

    def check_harm(self, job: Job, what: str) -> None:
        wt = self.scenario.fleet.workload_types[job.workload_type]
        if not wt.preemptible:
            self.counters.harmed.append(f"{job.namespace}/{job.name} ({job.workload_type}) {what}")

    # ------------------------------------------------------------------ the end

    def close(self, at: float) -> None:
        """Account what is still running and standing at the end."""
        accounting = self.accounting
        for job in list(self.running.values()):
            assert job.run_start is not None
            accounting.account_run(job, job.run_start, at)
            accounting.account_allocation(job.held, job.run_start, at)
        for ghost in self.ghosts:
            accounting.account_allocation(ghost.held, ghost.hold_start, at)
        for node in self.standing():
            accounting.account_node(node, at)


def _deleting(view: Pod) -> Pod:
    return dataclasses.replace(view, deleting=True)
