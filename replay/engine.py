"""The discrete-event model of one scenario: submissions, the admission gate, a scheduler, node
pools that scale within their limits, spot interruptions, and the controller every period.

Time is seconds from the start of the trace; the decisions see epoch seconds (`Settings.epoch`
plus trace time). Events at the same instant run in a fixed order (the controller's period
first, then nodes becoming ready, interruptions, GPUs released, completions, arrivals and
scale-down checks); after them the scheduler places what it can and the autoscaler asks for
nodes for what it could not.

What is modelled, and how (docs/replay.md has the reasons):

- admission: every pod a submission creates is reviewed by the real gate (`data.system.main`)
  with the spend document the controller last published; the reviews of one period go to OPA
  in one batch (the spend document only changes at periods, so batching changes nothing).
  A refused submission is not retried.
- scheduling: pending pods by priority, then arrival (or the team's weighted usage under
  fair-share); a pod goes to the fullest node that fits it (GPU packing); a team at its quota
  waits. The scheduler itself never preempts: preemption is the controller's.
- autoscaling: a pod that fits no ready node asks for nodes of the pools it can use, up to
  `max_nodes`; they are ready `provision_seconds` later. A node empty for
  `scale_down_seconds` is removed unless the pool is at `min_nodes`. A pool below `min_nodes`
  (after an interruption) is refilled.
- spot: each spot node is interrupted after an exponential time (rate per node-month); its
  pods lose their progress since their last checkpoint and are submitted again at once.
- the controller: `control.controller_pass`, every `period_seconds`.
"""

from __future__ import annotations

import dataclasses
import heapq
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from controller.act.opa import Decision
from controller.decide.preempt import fits
from controller.observe.model import Pod
from replay.objects import (
    TERMINATION_GRACE_SECONDS,
    Ghost,
    Job,
    PoolSpec,
    SimNode,
    State,
    job_for,
    pool_specs,
)
from replay.opa import Admission, AnswersAhead, BatchClient
from replay.scenarios import Scenario
from replay.settings import Settings
from replay.workloads import Workload

SECONDS_PER_MONTH = 30 * 86400

# Event kinds, in the order they run at the same instant.
PERIOD, NODE_READY, INTERRUPT, RELEASE, COMPLETE, ARRIVE, EMPTY_CHECK = range(7)
EVENT_NAMES = ("period", "node-ready", "interrupt", "release", "complete", "arrive", "empty")


@dataclass(kw_only=True)
class Counters:
    """What happened during a replay (within the window where it says so)."""

    admission_reviews: int = 0
    admission_denied: int = 0
    denied_gpu_seconds: float = 0.0
    """Work refused by the gate: what the denied submissions still had to run."""
    denied_by_rule: dict[str, int] = field(default_factory=dict)
    resubmissions: int = 0
    resubmissions_denied: int = 0
    warnings_by_rule: dict[str, int] = field(default_factory=dict)
    idle_warnings: int = 0
    idle_warnings_cleared: int = 0
    reclaims: int = 0
    reclaims_denied: int = 0
    reclaims_resumed: int = 0
    reclaimed_gpu_seconds: float = 0.0
    preemptions: int = 0
    """Victims evicted."""
    preemptors_served: int = 0
    preemptions_denied: int = 0
    victims_already_gone: int = 0
    """Victims planned that this pass had already removed (reclaimed for idleness): `act`
    counts an eviction of a pod that is gone as done."""
    preempt_lost_gpu_seconds: float = 0.0
    preempted_by_type: dict[str, int] = field(default_factory=dict)
    spot_interruptions: int = 0
    spot_pods_interrupted: int = 0
    spot_lost_gpu_seconds: float = 0.0
    nodes_requested: int = 0
    nodes_removed: int = 0
    harmed: list[str] = field(default_factory=list)
    """Pods of non-preemptible types (or exempt) that were preempted, reclaimed or
    interrupted: must stay empty."""


@dataclass(kw_only=True)
class Integrals:
    """GPU-seconds and dollars inside the window."""

    billed_gpu_seconds: dict[str, float] = field(
        default_factory=lambda: {"on-demand": 0.0, "spot": 0.0}
    )
    cost_usd: dict[str, float] = field(default_factory=lambda: {"on-demand": 0.0, "spot": 0.0})
    provisioned_gpu_seconds: float = 0.0
    allocated_gpu_seconds: float = 0.0
    busy_gpu_seconds: float = 0.0
    util_gpu_seconds: float = 0.0


@dataclass(kw_only=True)
class Series:
    """Fleet state sampled at every controller period."""

    t: list[float] = field(default_factory=list)
    provisioned: list[int] = field(default_factory=list)
    billed: list[int] = field(default_factory=list)
    spot: list[int] = field(default_factory=list)
    allocated: list[int] = field(default_factory=list)
    busy: list[int] = field(default_factory=list)
    util: list[float] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    pending_gpus: list[int] = field(default_factory=list)
    spend: dict[str, list[float]] = field(default_factory=dict)


class Replay:
    """One scenario over a list of workloads. `run()` once."""

    def __init__(
        self,
        scenario: Scenario,
        workloads: list[Workload],
        policy: BatchClient,
        settings: Settings | None = None,
        *,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.scenario = scenario
        self.settings = settings or Settings()
        self.policy = policy
        self.progress = progress
        self.epoch = self.settings.epoch
        self.period = float(scenario.period_seconds)
        self.jobs = [job_for(w, scenario) for w in workloads]
        self.horizon = float(
            self.settings.horizon
            if self.settings.horizon is not None
            else max(w.pod.deleted for w in workloads)
        )
        start, end = self.settings.window or (0.0, self.horizon)
        self.window = (float(start), float(min(end, self.horizon)))
        self.pools = pool_specs(scenario)
        self.live: dict[str, list[SimNode]] = {p.name: [] for p in self.pools}
        self.nodes: list[SimNode] = []
        self.pending: dict[int, Job] = {}
        self.running: dict[int, Job] = {}
        self.ghosts: list[Ghost] = []
        self.team_gpus: dict[str, int] = {t.name: 0 for t in scenario.fleet.teams}
        self.quota = {t.name: t.quota.get("nvidia.com/gpu", 0) for t in scenario.fleet.teams}
        self.weight = {t.name: t.queue_weight for t in scenario.fleet.teams}
        self.counters = Counters()
        self.integrals = Integrals()
        self.series = Series()
        self.events: list[tuple[float, int, int, Any]] = []
        self.submissions: list[tuple[float, int, Job]] = []
        self._seq = 0
        self._node_seq = 0
        self.batch_end = 0.0
        self.spend_document: dict[str, Any] = {}
        self.ahead = AnswersAhead()
        self.accumulators: dict[str, Any] = {}
        self.events_processed = 0
        self.periods = 0
        self.wall_seconds = 0.0
        self.now = 0.0
        rate = self.settings.spot_interruptions_per_node_month / SECONDS_PER_MONTH
        self._spot_rate = rate
        self._rng = np.random.default_rng([self.settings.seed, zlib.crc32(scenario.name.encode())])
        self._compatible = {
            capacity: self._compatible_pools(capacity) for capacity in ("on-demand", "spot")
        }
        from replay.controller_pass import Controller

        self.controller = Controller(self)

    # ------------------------------------------------------------------ setup and loop

    def _compatible_pools(self, capacity: str) -> list[PoolSpec]:
        """Pools a pod submitted to this capacity can land on, cheapest first, judged by the
        decision code's own predicate (`decide.preempt.fits`)."""
        probe = next((j for j in self.jobs if j.capacity == capacity), None)
        if probe is None:
            return []
        pod = probe.view(0.0, self.epoch)
        found = [p for p in self.pools if fits(pod, p.node_view(f"{p.name}-probe"))]
        return sorted(found, key=lambda p: (p.price_per_gpu_hour, p.name))

    def _push(self, at: float, kind: int, payload: Any = None) -> None:
        self._seq += 1
        heapq.heappush(self.events, (at, kind, self._seq, payload))

    def _submit_later(self, at: float, job: Job) -> None:
        self._seq += 1
        heapq.heappush(self.submissions, (at, self._seq, job))

    def run(self) -> Replay:
        began = time.perf_counter()
        for pool in self.pools:
            for _ in range(pool.config.min_nodes):
                self._request_node(pool, 0.0, ready_now=True)
        for job in self.jobs:
            self._submit_later(float(job.workload.pod.created), job)
        for pool_name, at in self.settings.interruptions:
            self._push(float(at), INTERRUPT, pool_name)
        self._push(0.0, PERIOD)
        dirty = False
        while self.events:
            at = self.events[0][0]
            if at > self.horizon:
                break
            if dirty and at > self.now:
                self._schedule(self.now)
                dirty = False
                continue
            at, kind, _, payload = heapq.heappop(self.events)
            self.now = at
            self.events_processed += 1
            dirty |= self._handle(kind, payload, at)
        if dirty:
            self._schedule(self.now)
        self._close(self.horizon)
        self.wall_seconds = time.perf_counter() - began
        return self

    def _handle(self, kind: int, payload: Any, at: float) -> bool:
        """Run one event; True when the scheduler should look again."""
        if kind == PERIOD:
            self._period(at)
            return True
        if kind == NODE_READY:
            return self._node_ready(payload, at)
        if kind == INTERRUPT:
            return self._interrupt(payload, at)
        if kind == RELEASE:
            return self._release(payload, at)
        if kind == COMPLETE:
            job, attempt = payload
            return self._complete(job, attempt, at)
        if kind == ARRIVE:
            job, admission = payload
            return self._arrive(job, admission, at)
        if kind == EMPTY_CHECK:
            node, since = payload
            return self._empty_check(node, since, at)
        raise AssertionError(kind)

    # ------------------------------------------------------------------ the period

    def _period(self, at: float) -> None:
        self.periods += 1
        self.controller.run_pass(
            at, lambda reclaim, reclaiming: self._admit(at, reclaim, reclaiming)
        )
        self._sample(at)
        if self.progress is not None and self.periods % 2000 == 0:
            self.progress(f"{self.scenario.name}: day {at / 86400:.1f}")
        if at + self.period <= self.horizon:
            self._push(at + self.period, PERIOD)

    def _admit(
        self, at: float, reclaim: list[dict[str, Any]], reclaiming: Iterable[str] = ()
    ) -> list[Decision]:
        """Review the pods submitted in the period starting at `at`, with the spend the
        controller has just published; `reclaim` decisions ride along in the same query, and
        so do the reviews of the owners of the pods in `reclaiming` (uids) that would come
        back inside this period if reclaimed: those are kept for `resubmit`, which would
        otherwise ask for each on its own with the same spend."""
        self.batch_end = at + self.period
        batch: list[Job] = []
        while self.submissions and self.submissions[0][0] < self.batch_end:
            when, _, job = heapq.heappop(self.submissions)
            if when > self.horizon:
                break
            job.attempt_created = when
            batch.append(job)
        reviews = [(job.review(), int((self.epoch + job.attempt_created) * 1e9)) for job in batch]
        ahead = self._returns_within_period(at, reclaiming)
        self.ahead.clear()  # answers for the previous spend document
        answers = self.policy.evaluate(
            admission=reviews + ahead, spend=self.spend_document, reclaim=reclaim
        )
        for job, admission in zip(batch, answers.admission, strict=False):
            self._push(job.attempt_created, ARRIVE, (job, admission))
        for (review, ns), admission in zip(ahead, answers.admission[len(reviews) :], strict=True):
            self.ahead.put(review, ns, self.spend_document, admission)
        return answers.reclaim

    def _returns_within_period(
        self, at: float, uids: Iterable[str]
    ) -> list[tuple[dict[str, Any], int]]:
        """The reviews `reclaim` then `resubmit` would send at once for these running pods:
        their owners' next pods, when they come back before the period ends."""
        wanted = set(uids)
        if not wanted:
            return []
        out = []
        for job in self.running.values():
            if job.uid not in wanted:
                continue
            progress = job.progress_at(at)  # what `_stop` returns in `reclaim`
            back = job.workload.profile.next_busy(progress)
            if back is None:
                continue
            saved_until = at + (back - progress)
            if saved_until <= self.horizon and saved_until < self.batch_end:
                out.append((job.review(job.attempt + 1), int((self.epoch + saved_until) * 1e9)))
        return out

    def _sample(self, at: float) -> None:
        s = self.series
        s.t.append(at)
        provisioned = billed = spot = 0
        for pool in self.pools:
            for node in self.live[pool.name]:
                billed += pool.gpus_per_node
                if node.ready:
                    provisioned += pool.gpus_per_node
                    if pool.spot:
                        spot += pool.gpus_per_node
        allocated = sum(g.gpus for g in self.ghosts)
        busy = 0
        util = 0.0
        for job in self.running.values():
            allocated += job.gpus
            level = job.util_at(at)
            if level > 0:
                busy += job.gpus
                util += job.gpus * level / 100.0
        s.provisioned.append(provisioned)
        s.billed.append(billed)
        s.spot.append(spot)
        s.allocated.append(allocated)
        s.busy.append(busy)
        s.util.append(round(util, 3))
        s.pending.append(len(self.pending))
        s.pending_gpus.append(sum(j.gpus for j in self.pending.values()))
        for team in self.team_gpus:
            record = self.spend_document.get(team) or {}
            s.spend.setdefault(team, []).append(float(record.get("usd", 0.0)))

    # ------------------------------------------------------------------ submissions

    def resubmit(self, job: Job, at: float, *, progress: float | None = None) -> None:
        """A new pod for the job (the Job controller's replacement, or the owner coming
        back), reviewed by the gate like any other."""
        if progress is not None:
            job.progress = progress
            job.checkpoint = max(job.checkpoint, progress) if job.workload.checkpoint_seconds else 0
        job.attempt += 1
        job.state = State.WAITING
        job.node = None
        job.run_start = None
        job.annotations = {}
        job.invalidate()
        self.counters.resubmissions += 1
        if at < self.batch_end:
            # Inside the period whose spend document is already published: review now (or
            # take the answer the period's query already brought for exactly this review).
            job.attempt_created = at
            review = job.review()
            ns = int((self.epoch + at) * 1e9)
            admission = self.ahead.take(review, ns, self.spend_document)
            if admission is None:
                admission = self.policy.evaluate(
                    admission=[(review, ns)], spend=self.spend_document
                ).admission[0]
            self._push(at, ARRIVE, (job, admission))
        else:
            self._submit_later(at, job)

    def _arrive(self, job: Job, admission: Admission, at: float) -> bool:
        c = self.counters
        first = job.attempt == 0
        counted = self.in_window(at)
        if counted:
            c.admission_reviews += 1
            for message in admission.warnings:
                rule = message.split(":", 1)[0]
                c.warnings_by_rule[rule] = c.warnings_by_rule.get(rule, 0) + 1
        if first:
            job.submitted_at = at
        if not admission.allowed:
            job.state = State.DENIED
            job.denied_rules = admission.rules
            if counted:
                c.admission_denied += 1
                c.denied_gpu_seconds += job.gpus * (job.workload.work_seconds - job.progress)
                if not first:
                    c.resubmissions_denied += 1
                for rule in admission.rules:
                    c.denied_by_rule[rule] = c.denied_by_rule.get(rule, 0) + 1
            return False
        job.state = State.PENDING
        job.pending_since = at
        job.invalidate()
        self.pending[job.workload.index] = job
        return True

    # ------------------------------------------------------------------ scheduling

    def _queue_key(self, job: Job) -> tuple[Any, ...]:
        since = job.pending_since or 0.0
        if self.scenario.queueing == "fair-share":
            share = self.team_gpus.get(job.team, 0) / max(1, self.weight.get(job.team, 1))
            return (-job.priority, share, since, job.workload.index)
        return (-job.priority, since, job.workload.index)

    def _schedule(self, at: float) -> None:
        if not self.pending:
            return
        unplaced: list[Job] = []
        for job in sorted(self.pending.values(), key=self._queue_key):
            if self.team_gpus.get(job.team, 0) + job.gpus > self.quota.get(job.team, 0):
                job.quota_blocked = True
                continue
            job.quota_blocked = False
            node = self._best_node(job)
            if node is None:
                unplaced.append(job)
            else:
                self._start(job, node, at)
        if unplaced:
            self._scale_up(unplaced, at)

    def _best_node(self, job: Job) -> SimNode | None:
        best: SimNode | None = None
        for pool in self._compatible[job.capacity]:
            for node in self.live[pool.name]:
                if (
                    node.ready
                    and node.free >= job.gpus
                    and (best is None or (node.free, node.name) < (best.free, best.name))
                ):
                    best = node
        return best

    def _start(self, job: Job, node: SimNode, at: float) -> None:
        del self.pending[job.workload.index]
        self.running[job.workload.index] = job
        node.free -= job.gpus
        node.jobs.append(job)
        node.empty_since = None
        self.team_gpus[job.team] = self.team_gpus.get(job.team, 0) + job.gpus
        job.state = State.RUNNING
        job.node = node
        job.run_start = at
        job.pending_since = None
        if job.first_start is None:
            job.first_start = at
        job.invalidate()
        remaining = job.workload.work_seconds - job.progress
        self._push(at + max(0.0, remaining), COMPLETE, (job, job.attempt))

    def _stop(self, job: Job, at: float, *, hold: bool) -> float:
        """End the job's run at `at`: account its busy time; its GPUs are released now, or
        held by a ghost for the grace period (`hold`). Returns its progress."""
        node = job.node
        assert node is not None and job.run_start is not None
        progress = job.progress_at(at)
        self._account_run(job, job.run_start, at)
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
            )
            node.ghosts.append(ghost)
            self.ghosts.append(ghost)
            self._push(ghost.release_at, RELEASE, ghost)
        else:
            self._free(node, job.gpus, job.team, job.run_start, at)
        job.node = None
        job.run_start = None
        job.progress = progress
        job.invalidate()
        return progress

    def _free(self, node: SimNode, gpus: int, team: str, since: float, at: float) -> None:
        self.integrals.allocated_gpu_seconds += gpus * self._overlap(since, at)
        self.team_gpus[team] = self.team_gpus.get(team, 0) - gpus
        if node.gone_at is None:
            node.free += gpus
            if node.empty:
                node.empty_since = at
                self._push(at + self.settings.scale_down_seconds, EMPTY_CHECK, (node, at))

    def _release(self, ghost: Ghost, at: float) -> bool:
        if ghost not in ghost.node.ghosts:
            return False  # its node went away with it
        ghost.node.ghosts.remove(ghost)
        self.ghosts.remove(ghost)
        self._free(ghost.node, ghost.gpus, ghost.team, ghost.hold_start, at)
        return True

    def _complete(self, job: Job, attempt: int, at: float) -> bool:
        if job.state is not State.RUNNING or job.attempt != attempt:
            return False
        self._stop(job, at, hold=False)
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
        self._stop(job, at, hold=True)
        job.preempted += 1
        job.lost_seconds += lost
        c = self.counters
        if self.in_window(at):
            c.preemptions += 1
            c.preempt_lost_gpu_seconds += lost * job.gpus
            kind = job.workload_type
            c.preempted_by_type[kind] = c.preempted_by_type.get(kind, 0) + 1
        self._check_harm(job, "preempted")
        self.resubmit(job, at, progress=restart)

    def reclaim(self, job: Job, at: float) -> None:
        """Reclaimed while idle: the pod is deleted; the owner comes back when its profile
        turns busy again (continuing from there), or never."""
        progress = self._stop(job, at, hold=True)
        job.reclaimed += 1
        profile = job.workload.profile
        back = profile.next_busy(progress)
        self._check_harm(job, "reclaimed")
        c = self.counters
        if back is None:
            saved_until = at + (profile.duration - progress)
            job.state = State.RECLAIMED
            job.finished_at = at
        else:
            saved_until = at + (back - progress)
        if self.in_window(at):
            c.reclaims += 1
            c.reclaimed_gpu_seconds += job.gpus * self._overlap(at, saved_until)
        if back is not None:
            if saved_until <= self.horizon:
                c.reclaims_resumed += 1 if self.in_window(at) else 0
                job.checkpoint = back if job.workload.checkpoint_seconds else job.checkpoint
                self.resubmit(job, saved_until, progress=back)
            else:
                job.state = State.RECLAIMED
                job.finished_at = at

    def _check_harm(self, job: Job, what: str) -> None:
        wt = self.scenario.fleet.workload_types[job.workload_type]
        if not wt.preemptible:
            self.counters.harmed.append(f"{job.namespace}/{job.name} ({job.workload_type}) {what}")

    # ------------------------------------------------------------------ nodes

    def _request_node(self, pool: PoolSpec, at: float, *, ready_now: bool = False) -> SimNode:
        self._node_seq += 1
        name = f"{pool.name}-{self._node_seq}"
        ready_at = at if ready_now else at + self.settings.provision_seconds
        node = SimNode(
            name=name,
            pool=pool,
            requested_at=at,
            ready_at=ready_at,
            view=pool.node_view(name),
            free=pool.gpus_per_node,
        )
        self.live[pool.name].append(node)
        self.nodes.append(node)
        if at > 0 or not ready_now:
            self.counters.nodes_requested += 1 if self.in_window(at) else 0
        self._push(ready_at, NODE_READY, node)
        return node

    def _node_ready(self, node: SimNode, at: float) -> bool:
        if node.gone_at is not None:
            return False
        node.ready = True
        node.empty_since = at
        self._push(at + self.settings.scale_down_seconds, EMPTY_CHECK, (node, at))
        if node.pool.spot and self._spot_rate > 0:
            self._push(at + float(self._rng.exponential(1.0 / self._spot_rate)), INTERRUPT, node)
        return True

    def _remove_node(self, node: SimNode, at: float) -> None:
        node.gone_at = at
        node.ready = False
        self.live[node.pool.name].remove(node)
        self._account_node(node, at)
        if self.in_window(at):
            self.counters.nodes_removed += 1
        if len(self.live[node.pool.name]) < node.pool.config.min_nodes:
            self._request_node(node.pool, at)

    def _empty_check(self, node: SimNode, since: float, at: float) -> bool:
        if node.gone_at is not None or not node.ready or node.empty_since != since:
            return False
        if not node.empty or len(self.live[node.pool.name]) <= node.pool.config.min_nodes:
            return False
        self._remove_node(node, at)
        return False

    def _interrupt(self, target: SimNode | str, at: float) -> bool:
        if isinstance(target, str):
            ready = [n for n in self.live.get(target, []) if n.ready]
            if not ready:
                return False
            target = min(ready, key=lambda n: (n.ready_at, n.name))
        node = target
        if node.gone_at is not None or not node.ready:
            return False
        c = self.counters
        counted = self.in_window(at)
        if counted:
            c.spot_interruptions += 1
        for ghost in list(node.ghosts):
            node.ghosts.remove(ghost)
            self.ghosts.remove(ghost)
            self._free(node, ghost.gpus, ghost.team, ghost.hold_start, at)
        for job in list(node.jobs):
            lost = self.lose_progress(job, at)
            restart = job.checkpoint
            self._stop(job, at, hold=False)
            job.interrupted += 1
            job.lost_seconds += lost
            if counted:
                c.spot_pods_interrupted += 1
                c.spot_lost_gpu_seconds += lost * job.gpus
            self._check_harm(job, "interrupted on spot")
            self.resubmit(job, at, progress=restart)
        self._remove_node(node, at)
        return True

    def _scale_up(self, unplaced: Iterable[Job], at: float) -> None:
        """Nodes for pods that fit no ready node: first into room on nodes already coming,
        else a new node of the cheapest pool that can take them, within `max_nodes`."""
        room: dict[str, list[int]] = {}
        for pool in self.pools:
            room[pool.name] = [n.free for n in self.live[pool.name] if not n.ready]
        for job in unplaced:
            for pool in self._compatible[job.capacity]:
                slots = room[pool.name]
                fit = next((i for i, free in enumerate(slots) if free >= job.gpus), None)
                if fit is not None:
                    slots[fit] -= job.gpus
                    break
                if (
                    len(self.live[pool.name]) < pool.config.max_nodes
                    and pool.gpus_per_node >= job.gpus
                ):
                    self._request_node(pool, at)
                    slots.append(pool.gpus_per_node - job.gpus)
                    break

    # ------------------------------------------------------------------ accounting

    def in_window(self, at: float) -> bool:
        return self.window[0] <= at <= self.window[1]

    def _overlap(self, a: float, b: float) -> float:
        return max(0.0, min(b, self.window[1]) - max(a, self.window[0]))

    def _account_run(self, job: Job, start: float, end: float) -> None:
        a, b = max(start, self.window[0]), min(end, self.window[1])
        if b <= a:
            return
        p0 = job.progress + (a - start)
        util, busy = job.workload.profile.integral(p0, p0 + (b - a))
        self.integrals.busy_gpu_seconds += busy * job.gpus
        self.integrals.util_gpu_seconds += util / 100.0 * job.gpus

    def _account_node(self, node: SimNode, end: float) -> None:
        pool = node.pool
        kind = "spot" if pool.spot else "on-demand"
        billed = self._overlap(node.requested_at, end) * pool.gpus_per_node
        self.integrals.billed_gpu_seconds[kind] += billed
        self.integrals.cost_usd[kind] += billed / 3600.0 * pool.price_per_gpu_hour
        if node.ready_at < end:
            self.integrals.provisioned_gpu_seconds += (
                self._overlap(node.ready_at, end) * pool.gpus_per_node
            )

    def _close(self, at: float) -> None:
        """Account what is still running and standing at the end."""
        for job in list(self.running.values()):
            assert job.run_start is not None
            self._account_run(job, job.run_start, at)
            self.integrals.allocated_gpu_seconds += job.gpus * self._overlap(job.run_start, at)
        for ghost in self.ghosts:
            self.integrals.allocated_gpu_seconds += ghost.gpus * self._overlap(ghost.hold_start, at)
        for pool in self.pools:
            for node in self.live[pool.name]:
                self._account_node(node, at)


def _deleting(view: Pod) -> Pod:
    return dataclasses.replace(view, deleting=True)
