"""The figures of one replayed scenario, as plain data (the JSON file holds exactly these)."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from replay.engine import Replay
from replay.objects import State
from replay.workloads import WORKLOAD_TYPES

HOUR = 3600.0
CPU_ONLY = "cpu-only"
"""The key of the CPU-only pods' waits in `queue_wait_seconds`."""


def nearest_rank(sorted_values: list[float], fraction: float) -> float:
    """The nearest-rank percentile (a value that occurred), 0 for no values."""
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, math.ceil(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


def _ratio(a: float, b: float) -> float:
    return round(a / b, 4) if b > 0 else 0.0


def _waits(replay: Replay) -> dict[str, Any]:
    start, end = replay.window
    by_type: dict[str, list[float]] = {kind: [] for kind in WORKLOAD_TYPES}
    never: dict[str, int] = dict.fromkeys(WORKLOAD_TYPES, 0)
    for job in replay.jobs:
        if job.submitted_at is None or not start <= job.submitted_at <= end:
            continue
        if job.state is State.DENIED and job.first_start is None:
            continue
        if job.first_start is None:
            never[job.workload_type] += 1
            continue
        by_type[job.workload_type].append(job.first_start - job.submitted_at)
    out: dict[str, Any] = {}
    every: list[float] = []
    for kind in WORKLOAD_TYPES:
        values = sorted(by_type[kind])
        every.extend(values)
        out[kind] = _percentiles(values) | {"never_started": never[kind]}
    out["all"] = _percentiles(sorted(every)) | {"never_started": sum(never.values())}
    # The trace's CPU-only pods (`replay.cpu_pods`), apart: "all" stays the GPU pods'.
    cpu_waits: list[float] = []
    cpu_never = 0
    for cpu_pod in replay.cpu.pods:
        if cpu_pod.submitted_at is None or not start <= cpu_pod.submitted_at <= end:
            continue
        if cpu_pod.first_start is None:
            cpu_never += 1
        else:
            cpu_waits.append(cpu_pod.first_start - cpu_pod.submitted_at)
    out[CPU_ONLY] = _percentiles(sorted(cpu_waits)) | {"never_started": cpu_never}
    return out


def _percentiles(values: list[float]) -> dict[str, Any]:
    return {
        "count": len(values),
        "p50": round(nearest_rank(values, 0.50), 1),
        "p95": round(nearest_rank(values, 0.95), 1),
        "p99": round(nearest_rank(values, 0.99), 1),
        "max": round(values[-1], 1) if values else 0.0,
    }


def _hourly(replay: Replay) -> dict[str, list[float]]:
    """Period samples averaged per hour, over the window."""
    s = replay.series
    start, end = replay.window
    buckets: dict[int, list[int]] = {}
    for i, t in enumerate(s.t):
        if start <= t <= end:
            buckets.setdefault(int(t // HOUR), []).append(i)
    out: dict[str, list[float]] = {"hour": []}
    names = (
        "provisioned",
        "billed",
        "spot",
        "allocated",
        "busy",
        "util",
        "pending",
        "pending_gpus",
    )
    for name in names:
        out[name] = []
    for hour in sorted(buckets):
        rows = buckets[hour]
        out["hour"].append(hour)
        for name in names:
            column = getattr(s, name)
            out[name].append(round(sum(column[i] for i in rows) / len(rows), 2))
    return out


def _spend_by_month(replay: Replay) -> dict[str, dict[str, float]]:
    """The largest month-to-date spend the controller published for each team and month."""
    s = replay.series
    out: dict[str, dict[str, float]] = {}
    # Months begin on the hour: one date conversion an hour (not within a second of the next
    # hour, where rounding could carry into it).
    by_hour: dict[int, str] = {}
    month_of_t: list[str] = []
    for t in s.t:
        at = replay.epoch + t
        hour = math.floor(at / HOUR)
        month = by_hour.get(hour) if at - hour * HOUR < HOUR - 1.0 else None
        if month is None:
            month = dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m")
            if at - hour * HOUR < HOUR - 1.0:
                by_hour[hour] = month
        month_of_t.append(month)
    for team, values in s.spend.items():
        months: dict[str, float] = {}
        for month, usd in zip(month_of_t, values, strict=True):
            months[month] = max(months.get(month, 0.0), usd)
        out[team] = {m: round(v, 2) for m, v in months.items() if v > 0}
    return out


def scenario_figures(replay: Replay) -> dict[str, Any]:
    sc = replay.scenario
    c = replay.counters
    i = replay.integrals
    start, end = replay.window
    billed = sum(i.billed_gpu_seconds.values())
    cost = sum(i.cost_usd.values())
    busy_hours = i.busy_gpu_seconds / HOUR
    states: dict[str, int] = {}
    for job in replay.jobs:
        states[job.state.value] = states.get(job.state.value, 0) + 1
    policy = replay.policy.stats
    return {
        "name": sc.name,
        "title": sc.title,
        "summary": sc.summary,
        "controller": list(sc.concerns),
        "queueing": sc.queueing,
        "spot_types": list(sc.spot_types),
        "window": {"start_s": start, "end_s": end, "days": round((end - start) / 86400, 2)},
        "fleet": {
            "pools": [
                {
                    "name": p.name,
                    "capacity_type": p.config.capacity_type,
                    "model": p.config.model,
                    "machine_type": p.config.machine_type,
                    "gpus_per_node": p.gpus_per_node,
                    "min_nodes": p.config.min_nodes,
                    "max_nodes": p.config.max_nodes,
                    "usd_per_gpu_hour": p.price_per_gpu_hour,
                }
                for p in replay.pools
            ],
            "teams": {
                t.name: {
                    "quota_gpus": t.quota.get("nvidia.com/gpu", 0),
                    "guaranteed_gpus": t.guaranteed.get("nvidia.com/gpu", 0),
                    "monthly_budget_usd": t.monthly_budget_usd,
                    "queue_weight": t.queue_weight,
                }
                for t in sc.fleet.teams
            },
        },
        "gpu_hours": {
            "billed": round(billed / HOUR, 2),
            "billed_on_demand": round(i.billed_gpu_seconds["on-demand"] / HOUR, 2),
            "billed_spot": round(i.billed_gpu_seconds["spot"] / HOUR, 2),
            "provisioned": round(i.provisioned_gpu_seconds / HOUR, 2),
            "allocated": round(i.allocated_gpu_seconds / HOUR, 2),
            "busy": round(busy_hours, 2),
            "utilisation_weighted": round(i.util_gpu_seconds / HOUR, 2),
        },
        "ratios": {
            "allocation": _ratio(i.allocated_gpu_seconds, i.provisioned_gpu_seconds),
            "busy": _ratio(i.busy_gpu_seconds, i.provisioned_gpu_seconds),
            "busy_of_billed": _ratio(i.busy_gpu_seconds, billed),
            "mean_utilisation": _ratio(i.util_gpu_seconds, i.provisioned_gpu_seconds),
        },
        "cost_usd": {
            "on_demand": round(i.cost_usd["on-demand"], 2),
            "spot": round(i.cost_usd["spot"], 2),
            "total": round(cost, 2),
            "per_busy_gpu_hour": round(cost / busy_hours, 3) if busy_hours else None,
        },
        "queue_wait_seconds": _waits(replay),
        "jobs": {"total": len(replay.jobs), "final_states": dict(sorted(states.items()))},
        "admission": {
            "reviews": c.admission_reviews,
            "denied": c.admission_denied,
            "denied_by_rule": dict(sorted(c.denied_by_rule.items())),
            "denied_gpu_hours": round(c.denied_gpu_seconds / HOUR, 2),
            "warnings_by_rule": dict(sorted(c.warnings_by_rule.items())),
            "resubmissions": c.resubmissions,
            "resubmissions_denied": c.resubmissions_denied,
        },
        "reclaim": {
            "warnings": c.idle_warnings,
            "warnings_cleared": c.idle_warnings_cleared,
            "reclaimed": c.reclaims,
            "denied_by_policy": c.reclaims_denied,
            "owner_came_back": c.reclaims_resumed,
            "gpu_hours": round(c.reclaimed_gpu_seconds / HOUR, 2),
        },
        "preemption": {
            "victims": c.preemptions,
            "preemptors_served": c.preemptors_served,
            "victims_denied_by_policy": c.preemptions_denied,
            "victims_already_gone": c.victims_already_gone,
            "work_lost_gpu_hours": round(c.preempt_lost_gpu_seconds / HOUR, 2),
            "victims_by_type": dict(sorted(c.preempted_by_type.items())),
        },
        "spot": {
            "interruptions": c.spot_interruptions,
            "pods_interrupted": c.spot_pods_interrupted,
            "work_lost_gpu_hours": round(c.spot_lost_gpu_seconds / HOUR, 2),
        },
        "nodes": {"requested": c.nodes_requested, "removed": c.nodes_removed},
        "harmed_non_preemptible": {"count": len(c.harmed), "pods": c.harmed[:20]},
        "spend_by_team_month": _spend_by_month(replay),
        "throughput": {
            "wall_seconds": round(replay.wall_seconds, 2),
            "events": replay.events_processed,
            "events_per_second": round(replay.events_processed / replay.wall_seconds, 1)
            if replay.wall_seconds
            else None,
            "periods": replay.periods,
            "periods_per_second": round(replay.periods / replay.wall_seconds, 1)
            if replay.wall_seconds
            else None,
            "controller_seconds": round(replay.controller.seconds, 2),
            "opa": {
                "queries": policy.queries,
                "seconds": round(policy.seconds, 2),
                "data_writes": policy.data_writes,
                "admission_reviews": policy.admission,
                "reviews_answered_ahead": replay.ahead.taken,
                "reclaim_decisions": policy.reclaim,
                "preempt_decisions": policy.preempt,
            },
        },
        "series": _hourly(replay),
    }
