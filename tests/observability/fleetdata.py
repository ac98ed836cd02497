"""Representative fleet data for the dashboards and the report: two days of controller passes
(every PERIOD seconds, ending just before now) as the controller's own `Summary` exposes them,
and the DCGM series of the GPUs the teams' pods hold.

The controller's month-to-date spend is modelled the way the report must reconcile it: each
pass adds the previous pass's burn rate over one period (reset at the start of a month), so the
last pass's period is not yet in it.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field

from controller.summary import Series, Summary
from localfleet.servers import Sample

PERIOD = 300
DAYS = 2
PRICES = {("h100-80gb", "on-demand"): 12.29, ("a100-40gb", "spot"): 1.23}
MODEL_NAMES = {"h100-80gb": "NVIDIA H100 80GB HBM3", "a100-40gb": "NVIDIA A100-SXM4-40GB"}
BUDGETS = {"research": 50000.0, "serving": 80000.0, "analytics": 10000.0}
NAMESPACES = {"ml-research": "research", "serving": "serving", "analytics": "analytics"}
QUOTAS = {"research": 64, "serving": 48, "analytics": 16}


@dataclass(frozen=True)
class Workload:
    team: str
    namespace: str
    workload_type: str
    model: str
    capacity_type: str
    gpus: int
    hosts: tuple[str, ...]
    util: float
    start: int  # pass index
    end: int  # pass index (exclusive)


@dataclass
class FleetData:
    samples: list[Sample] = field(default_factory=list)
    end: float = 0.0
    start: float = 0.0
    spend: dict[str, float] = field(default_factory=dict)
    """The controller's month-to-date spend per team at the last pass."""
    gpu_hours: dict[tuple[str, str, str, str], float] = field(default_factory=dict)
    """(team, workload type, model, capacity type) -> GPU-hours in the current month."""
    burst_gpu_hours: dict[tuple[str, str], float] = field(default_factory=dict)
    """(team, tier) -> GPU-hours on burst nodes in the current month."""


def _workloads(passes: int) -> list[Workload]:
    half = passes // 2
    return [
        Workload(
            "research",
            "ml-research",
            "training",
            "h100-80gb",
            "on-demand",
            8,
            ("h100-0",),
            88.0,
            0,
            passes,
        ),
        Workload(
            "research",
            "ml-research",
            "training",
            "a100-40gb",
            "spot",
            8,
            ("a100-0",),
            72.0,
            half // 2,
            passes,
        ),
        Workload(
            "research",
            "ml-research",
            "notebook",
            "a100-40gb",
            "spot",
            1,
            ("a100-1",),
            2.0,
            10,
            half,
        ),
        Workload(
            "serving",
            "serving",
            "inference",
            "h100-80gb",
            "on-demand",
            4,
            ("h100-1",),
            45.0,
            0,
            passes,
        ),
        Workload(
            "analytics",
            "analytics",
            "batch",
            "a100-40gb",
            "spot",
            2,
            ("a100-2",),
            60.0,
            20,
            passes - 30,
        ),
        Workload(
            "analytics",
            "analytics",
            "notebook",
            "a100-40gb",
            "spot",
            1,
            ("a100-3",),
            1.0,
            5,
            passes,
        ),
    ]


def month_start(at: float) -> float:
    moment = dt.datetime.fromtimestamp(at, dt.UTC)
    return dt.datetime(moment.year, moment.month, 1, tzinfo=dt.UTC).timestamp()


def generate(now: float | None = None) -> FleetData:
    now = time.time() if now is None else now
    end = (int(now) // PERIOD) * PERIOD - PERIOD  # the last pass, before now
    passes = DAYS * 86400 // PERIOD
    start = end - (passes - 1) * PERIOD
    data = FleetData(end=float(end), start=float(start))
    workloads = _workloads(passes)
    previous: Series = {}
    spend = dict.fromkeys(BUDGETS, 0.0)
    rate_before: dict[str, float] = dict.fromkeys(BUDGETS, 0.0)
    month = month_start(end)
    for index in range(passes):
        at = start + index * PERIOD
        if at >= month and at - PERIOD < month:
            spend = dict.fromkeys(BUDGETS, 0.0)  # the accumulator of a new month
            rate_before = dict.fromkeys(BUDGETS, 0.0)
        for team in spend:
            spend[team] += rate_before[team] * PERIOD / 3600
        summary = Summary(started=at - 2.5)
        rates = dict.fromkeys(BUDGETS, 0.0)
        for namespace, team in NAMESPACES.items():
            summary.set("namespace_team", 1, namespace=namespace, team=team)
        for team, budget in BUDGETS.items():
            summary.set("team_budget_usd", budget, team=team)
            summary.set("team_quota_gpus", QUOTAS[team], team=team, resource="nvidia.com/gpu")
        pools: dict[tuple[str, str, str], int] = {}
        running = [w for w in workloads if w.start <= index < w.end]
        for w in running:
            labels = {
                "team": w.team,
                "resource": "nvidia.com/gpu",
                "workload_type": w.workload_type,
                "model": w.model,
                "capacity_type": w.capacity_type,
            }
            summary.inc("team_gpus", w.gpus, state="held", **labels)
            price = PRICES[(w.model, w.capacity_type)]
            summary.inc(
                "team_cost_rate",
                w.gpus * price,
                team=w.team,
                workload_type=w.workload_type,
                model=w.model,
                capacity_type=w.capacity_type,
            )
            rates[w.team] += w.gpus * price
            if w.util < 5:
                summary.inc(
                    "team_gpus",
                    w.gpus,
                    state="idle",
                    team=w.team,
                    resource="nvidia.com/gpu",
                    workload_type=w.workload_type,
                )
            pool = "h100-ondemand" if w.model == "h100-80gb" else "a100-spot"
            key = (pool, w.model, w.capacity_type)
            pools[key] = pools.get(key, 0) + w.gpus
            if at >= month:
                hours = (w.team, w.workload_type, w.model, w.capacity_type)
                data.gpu_hours[hours] = data.gpu_hours.get(hours, 0.0) + w.gpus * PERIOD / 3600
            # research's H100 training ran on a burst node (the on-demand tier, past its
            # reservation) in the second half of the data
            if w.team == "research" and w.model == "h100-80gb" and index >= passes // 2:
                summary.inc("team_burst_gpus", w.gpus, team=w.team, tier="on-demand", model=w.model)
                if at >= month:
                    burst = (w.team, "on-demand")
                    data.burst_gpu_hours[burst] = (
                        data.burst_gpu_hours.get(burst, 0.0) + w.gpus * PERIOD / 3600
                    )
            if w.start == index:
                summary.observe(
                    "queue_wait",
                    40.0 if w.workload_type == "inference" else 1300.0,
                    team=w.team,
                    workload_type=w.workload_type,
                )
        for team, workload_type, state, count in (
            ("serving", "inference", "running", 4),
            ("serving", "inference", "pending", 1 if index % 97 == 0 else 0),
            ("research", "training", "running", sum(1 for w in running if w.team == "research")),
            ("research", "training", "pending", 2 if index % 11 == 0 else 0),
        ):
            summary.set("team_pods", count, team=team, workload_type=workload_type, state=state)
        summary.set("queue_oldest", 600.0, team="research", workload_type="training")
        for (pool, model, capacity_type), model_total in (
            (("h100-ondemand", "h100-80gb", "on-demand"), 64),
            (("a100-spot", "a100-40gb", "spot"), 64),
        ):
            base = {
                "pool": pool,
                "resource": "nvidia.com/gpu",
                "model": model,
                "capacity_type": capacity_type,
            }
            summary.set("pool_accelerators", model_total, state="allocatable", **base)
            summary.set(
                "pool_accelerators",
                pools.get((pool, model, capacity_type), 0),
                state="in-use",
                **base,
            )
            # the fragmentation concern: a few free GPUs stranded on partly used nodes
            free = model_total - pools.get((pool, model, capacity_type), 0)
            summary.set("pool_fragmented", (free % 8) * 0.5, **base)
        summary.set(
            "pool_accelerators",
            8,
            state="unavailable",
            pool="a100-spot",
            resource="nvidia.com/gpu",
            model="a100-40gb",
            capacity_type="spot",
        )
        # the upgrade and health passes (their own Pushgateway jobs in a cluster): a rollout
        # of the spot pool, halted for a while by a failed node, and one node out for repair
        summary.set("upgrade_states", 6, pool="a100-spot", state="upgrade-done")
        summary.set("upgrade_states", 1, pool="a100-spot", state="upgrade-failed")
        summary.set("upgrade_states", 1, pool="a100-spot", state="upgrade-required")
        summary.set("upgrade_halted", 1 if index % 24 < 12 else 0, pool="a100-spot")
        summary.set("health_states", 1, pool="a100-spot", state="quarantined")
        summary.set(
            "health_states", 1 if index % 48 < 6 else 0, pool="a100-spot", state="needs-replacement"
        )
        for team in BUDGETS:
            summary.set("team_spend_usd", round(spend[team], 2), team=team)
            summary.set("team_budget_ratio", spend[team] / BUDGETS[team], team=team)
        summary.action("spend", "publish", "done")
        if index % 12 == 6:
            summary.action("idle", "warn", "done")
        if index % 12 == 0 and index:
            summary.action("idle", "reclaim", "done")
            summary.inc(
                "reclaimed_gpus",
                1,
                team="analytics",
                resource="nvidia.com/gpu",
                workload_type="notebook",
                model="a100-40gb",
                capacity_type="spot",
            )
            summary.inc(
                "reclaimed_gpu_hours",
                0.25,
                team="analytics",
                resource="nvidia.com/gpu",
                workload_type="notebook",
                model="a100-40gb",
                capacity_type="spot",
            )
            summary.inc(
                "reclaim_savings_usd",
                0.25 * 1.23,
                team="analytics",
                resource="nvidia.com/gpu",
                workload_type="notebook",
                model="a100-40gb",
                capacity_type="spot",
            )
        if index % 40 == 3:
            summary.action("preempt", "evict", "denied")
            summary.error("preempt", "temporary")
        summary.finish(api_requests=40)
        summary.set("last_pass_timestamp_seconds", at)
        summary.set("last_pass_duration_seconds", 2.5)
        exposed = summary.series(previous)
        previous = {}
        for family in exposed.values():
            for (metric, label_pairs), value in family.items():
                data.samples.append(Sample(metric, dict(label_pairs), value, at))
                previous[(metric, label_pairs)] = value
        _dcgm(data, running, index, at, passes)
        rate_before = rates
    data.spend = {team: round(usd, 2) for team, usd in spend.items()}
    return data


def _dcgm(data: FleetData, running: list[Workload], index: int, at: float, passes: int) -> None:
    for w in running:
        for host in w.hosts:
            for gpu in range(w.gpus):
                labels = {
                    "Hostname": host,
                    "gpu": str(gpu),
                    "modelName": MODEL_NAMES[w.model],
                    "namespace": w.namespace,
                    "pod": f"{w.workload_type}-{w.team}",
                    "container": "main",
                }
                util = w.util + (5.0 if index % 2 else -5.0) * (w.util > 10)
                hot = host == "h100-0" and gpu == 3 and passes // 3 <= index < passes // 3 + 4
                values = {
                    "DCGM_FI_DEV_GPU_UTIL": max(0.0, util),
                    "DCGM_FI_DEV_POWER_USAGE": 80.0 + 4.0 * max(0.0, util),
                    "DCGM_FI_DEV_GPU_TEMP": 88.0 if hot else 45.0 + util / 3,
                    "DCGM_FI_DEV_XID_ERRORS": 79.0
                    if host == "a100-0" and gpu == 1 and index > passes - 20
                    else 0.0,
                    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 1.0
                    if host == "h100-1" and gpu == 2 and index > passes // 2
                    else 0.0,
                }
                for metric, value in values.items():
                    data.samples.append(Sample(metric, labels, value, at))
