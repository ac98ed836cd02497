"""The discrete-event model of one scenario: the event loop, submissions and the admission gate,
and the controller every period. The fleet's state is `fleet`, the scheduler `scheduler`, node
pools and spot `autoscaler`, what is measured `accounting`.

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
- the controller: `controller_pass.Controller`, every `period_seconds`.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from controller.act.opa import Decision
from replay.accounting import Accounting, Counters, Integrals, Series
from replay.autoscaler import Autoscaler
from replay.controller_pass import Controller
from replay.cpu_pods import CpuWork, ReservePerIdleGpu, single_ratio
from replay.events import (
    ARRIVE,
    COMPLETE,
    CPU_ARRIVE,
    CPU_COMPLETE,
    EMPTY_CHECK,
    INTERRUPT,
    NODE_READY,
    PERIOD,
    RELEASE,
    EventQueue,
)
from replay.fleet import FleetState
from replay.objects import Job, PoolSpec, State, job_for
from replay.opa import Admission, AnswersAhead, BatchClient
from replay.scenarios import Scenario
from replay.scheduler import Scheduler
from replay.settings import Settings
from replay.trace import TracePod
from replay.workloads import Workload


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
        cpu_pods: Sequence[TracePod] = (),
        reserve: ReservePerIdleGpu | None = None,
    ) -> None:
        """`cpu_pods`: the trace's pods without GPUs (`replay.cpu_pods`); `reserve`: the CPU
        they must leave per idle GPU of a pool's nodes (default: the scenario's Volcano
        configuration, `volcano.reserve_cpu_per_idle_gpu`)."""
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
        self.accounting = Accounting(self.window)
        self.events = EventQueue()
        self.fleet = FleetState(
            scenario,
            self.settings,
            self.jobs,
            horizon=self.horizon,
            events=self.events,
            accounting=self.accounting,
            resubmit=self.resubmit,
        )
        self.cpu = CpuWork(
            self.fleet,
            cpu_pods,
            reserve or single_ratio(scenario.fleet.volcano.reserve_cpu_per_idle_gpu),
        )
        self.fleet.on_node_lost = self.cpu.lose_node
        self.scheduler = Scheduler(self.fleet)
        self.autoscaler = Autoscaler(self.fleet)
        self.controller = Controller(self.fleet, policy)
        self.submissions: list[tuple[float, int, Job]] = []
        self._submission_seq = 0
        self.batch_end = 0.0
        self.ahead = AnswersAhead()
        self.events_processed = 0
        self.periods = 0
        self.wall_seconds = 0.0
        self.now = 0.0

    # What the figures read.

    @property
    def counters(self) -> Counters:
        return self.accounting.counters

    @property
    def integrals(self) -> Integrals:
        return self.accounting.integrals

    @property
    def series(self) -> Series:
        return self.accounting.series

    @property
    def pools(self) -> list[PoolSpec]:
        return self.fleet.pools

    @property
    def spend_document(self) -> dict[str, Any]:
        """The month-to-date spend the controller last published (`data.fleetplane.spend`)."""
        return self.controller.spend_document

    # ------------------------------------------------------------------ setup and loop

    def _submit_later(self, at: float, job: Job) -> None:
        self._submission_seq += 1
        heapq.heappush(self.submissions, (at, self._submission_seq, job))

    def run(self) -> Replay:
        began = time.perf_counter()
        self.autoscaler.fill_minimums()
        for job in self.jobs:
            self._submit_later(float(job.workload.pod.created), job)
        self.cpu.submit_all()
        for pool_name, at in self.settings.interruptions:
            self.events.push(float(at), INTERRUPT, pool_name)
        self.events.push(0.0, PERIOD)
        events = self.events
        dirty = False
        while events:
            at = events.next_time()
            if at > self.horizon:
                break
            if dirty and at > self.now:
                self._schedule(self.now)
                dirty = False
                continue
            at, kind, payload = events.pop()
            self.now = at
            self.events_processed += 1
            dirty |= self._handle(kind, payload, at)
        if dirty:
            self._schedule(self.now)
        self.fleet.close(self.horizon)
        self.wall_seconds = time.perf_counter() - began
        return self

    def _handle(self, kind: int, payload: Any, at: float) -> bool:
        """Run one event; True when the scheduler should look again."""
        if kind == PERIOD:
            self._period(at)
            return True
        if kind == NODE_READY:
            return self.autoscaler.node_ready(payload, at)
        if kind == INTERRUPT:
            return self.autoscaler.interrupt(payload, at)
        if kind == RELEASE:
            return self.fleet.release(payload, at)
        if kind == COMPLETE:
            job, attempt = payload
            return self.fleet.complete(job, attempt, at)
        if kind == ARRIVE:
            job, admission = payload
            return self._arrive(job, admission, at)
        if kind == CPU_COMPLETE:
            cpu_pod, attempt = payload
            return self.cpu.complete(cpu_pod, attempt, at)
        if kind == CPU_ARRIVE:
            return self.cpu.arrive(payload, at)
        if kind == EMPTY_CHECK:
            node, since = payload
            return self.autoscaler.empty_check(node, since, at)
        raise AssertionError(kind)

    def _schedule(self, at: float) -> None:
        unplaced = self.scheduler.schedule(at)
        if unplaced:
            self.autoscaler.scale_up(unplaced, at)
        if self.cpu.pending:
            # After the GPU pods: without a priority class, CPU-only pods come last.
            waiting = self.cpu.schedule(at)
            if waiting:
                self.autoscaler.scale_up(waiting, at, pools_of=self.cpu.pools_for)

    # ------------------------------------------------------------------ the period

    def _period(self, at: float) -> None:
        self.periods += 1
        self.controller.run_pass(
            at, lambda reclaim, reclaiming: self._admit(at, reclaim, reclaiming)
        )
        fleet = self.fleet
        self.accounting.sample(
            at,
            gpus=fleet.standing_gpus(),
            running=fleet.running.values(),
            ghosts=fleet.ghosts,
            pending=fleet.pending.values(),
            teams=fleet.team_gpus,
            spend_document=self.spend_document,
        )
        if self.progress is not None and self.periods % 2000 == 0:
            self.progress(f"{self.scenario.name}: day {at / 86400:.1f}")
        if at + self.period <= self.horizon:
            self.events.push(at + self.period, PERIOD)

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
            self.events.push(job.attempt_created, ARRIVE, (job, admission))
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
        for job in self.fleet.running.values():
            if job.uid not in wanted:
                continue
            progress = job.progress_at(at)  # what `FleetState.stop` returns in `reclaim`
            back = job.workload.profile.next_busy(progress)
            if back is None:
                continue
            saved_until = at + (back - progress)
            if saved_until <= self.horizon and saved_until < self.batch_end:
                out.append((job.review(job.attempt + 1), int((self.epoch + saved_until) * 1e9)))
        return out

    # ------------------------------------------------------------------ submissions

    def resubmit(self, job: Job, at: float, progress: float | None = None) -> None:
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
            self.events.push(at, ARRIVE, (job, admission))
        else:
            self._submit_later(at, job)

    def _arrive(self, job: Job, admission: Admission, at: float) -> bool:
        c = self.counters
        first = job.attempt == 0
        counted = self.accounting.in_window(at)
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
        self.fleet.pending[job.workload.index] = job
        return True
