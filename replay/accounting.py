"""What a replay measures: counts of what happened, GPU-seconds and dollars inside the
measurement window, and the fleet's state sampled at every controller period."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from replay.objects import Ghost, Job, SimNode


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
    allocated: list[float] = field(default_factory=list)
    busy: list[float] = field(default_factory=list)
    util: list[float] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    pending_gpus: list[int] = field(default_factory=list)
    spend: dict[str, list[float]] = field(default_factory=dict)


class StandingGpus(NamedTuple):
    """The GPUs of the standing nodes: billed (requested, not removed), provisioned (ready) and
    the provisioned ones on spot."""

    billed: int
    provisioned: int
    spot: int

    @classmethod
    def of(cls, nodes: Iterable[SimNode]) -> StandingGpus:
        provisioned = billed = spot = 0
        for node in nodes:
            pool = node.pool
            billed += pool.gpus_per_node
            if node.ready:
                provisioned += pool.gpus_per_node
                if pool.spot:
                    spot += pool.gpus_per_node
        return cls(billed=billed, provisioned=provisioned, spot=spot)


class Accounting:
    """The counters, integrals and series of one replay, and the window they cover."""

    def __init__(self, window: tuple[float, float]) -> None:
        self.window = window
        self.counters = Counters()
        self.integrals = Integrals()
        self.series = Series()

    def in_window(self, at: float) -> bool:
        return self.window[0] <= at <= self.window[1]

    def overlap(self, a: float, b: float) -> float:
        """How much of [a, b] lies inside the window."""
        return max(0.0, min(b, self.window[1]) - max(a, self.window[0]))

    def account_run(self, job: Job, start: float, end: float) -> None:
        """The busy and utilised GPU-seconds of a run from `start` to `end`."""
        a, b = max(start, self.window[0]), min(end, self.window[1])
        if b <= a:
            return
        p0 = job.progress + (a - start)
        util, busy = job.workload.profile.integral(p0, p0 + (b - a))
        self.integrals.busy_gpu_seconds += busy * job.held
        self.integrals.util_gpu_seconds += util / 100.0 * job.held

    def account_allocation(self, gpus: float, since: float, until: float) -> None:
        self.integrals.allocated_gpu_seconds += gpus * self.overlap(since, until)

    def account_node(self, node: SimNode, end: float) -> None:
        """The bill of a node from its request to `end`, and its provisioned GPU-seconds."""
        pool = node.pool
        kind = "spot" if pool.spot else "on-demand"
        billed = self.overlap(node.requested_at, end) * pool.gpus_per_node
        self.integrals.billed_gpu_seconds[kind] += billed
        self.integrals.cost_usd[kind] += billed / 3600.0 * pool.price_per_gpu_hour
        if node.ready_at < end:
            self.integrals.provisioned_gpu_seconds += (
                self.overlap(node.ready_at, end) * pool.gpus_per_node
            )

    def sample(
        self,
        at: float,
        *,
        gpus: StandingGpus,
        running: Iterable[Job],
        ghosts: Iterable[Ghost],
        pending: Iterable[Job],
        teams: Iterable[str],
        spend_document: Mapping[str, Any],
    ) -> None:
        """One sample of the series: GPUs standing, held, busy and waiting, and each team's
        published month-to-date spend."""
        s = self.series
        s.t.append(at)
        allocated = sum(g.held for g in ghosts)
        busy = 0.0
        util = 0.0
        for job in running:
            held = job.held
            allocated += held
            level = job.util_at(at)
            if level > 0:
                busy += held
                util += held * level / 100.0
        waiting = list(pending)
        s.provisioned.append(gpus.provisioned)
        s.billed.append(gpus.billed)
        s.spot.append(gpus.spot)
        s.allocated.append(allocated)
        s.busy.append(busy)
        s.util.append(round(util, 3))
        s.pending.append(len(waiting))
        s.pending_gpus.append(sum(j.gpus for j in waiting))
        for team in teams:
            record = spend_document.get(team) or {}
            s.spend.setdefault(team, []).append(float(record.get("usd", 0.0)))
