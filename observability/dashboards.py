"""The Grafana dashboards, built with Grafana's Python SDK (grafana-foundation-sdk): fleet,
teams and controller. `dashboards()` returns each as the JSON Grafana imports; the components
ship them as ConfigMaps labelled `grafana_dashboard: "1"` for kube-prometheus-stack's Grafana
sidecar.

Every query reads raw series (the controller's metrics, DCGM, the API server's), not recorded
ones, so a dashboard shows history from before its rules were loaded (and backfilled data).
Variables: `datasource` (a Prometheus) and `team` (multi-value, "All" matches every team).
`panel_queries` lists every panel's queries, which tests/observability evaluate against a real
Prometheus.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef, VariableRefresh
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
TEAM = 'team=~"$team"'
TAGS = ["fleetplane"]

# Team utilisation: DCGM's pod attribution joined to the team of the namespace.
TEAM_UTIL = (
    'DCGM_FI_DEV_GPU_UTIL{namespace!=""} * on (namespace) group_left (team) '
    f"fleetplane_namespace_team{{{TEAM}}}"
)


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""
    instant: bool = False


def _target(query: Query, ref: str) -> prometheus.Dataquery:
    target = (
        prometheus.Dataquery()
        .expr(query.expr)
        .legend_format(query.legend or "__auto")
        .ref_id(ref)
        .datasource(DATASOURCE)
    )
    return target.instant() if query.instant else target.range()


def _series(title: str, unit: str, *queries: Query, description: str = "") -> Any:
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .datasource(DATASOURCE)
        .height(8)
        .span(12)
        .fill_opacity(10)
    )
    for index, query in enumerate(queries):
        panel = panel.with_target(_target(query, chr(ord("A") + index)))
    return panel


def _stat(title: str, unit: str, query: Query, description: str = "") -> Any:
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .datasource(DATASOURCE)
        .height(4)
        .span(6)
        .with_target(_target(Query(query.expr, query.legend, instant=True), "A"))
    )


def _table(title: str, unit: str, query: Query, description: str = "") -> Any:
    return (
        table.Panel()
        .title(title)
        .description(description)
        .unit(unit)
        .datasource(DATASOURCE)
        .height(8)
        .span(12)
        .with_target(
            _target(Query(query.expr, query.legend, instant=True), "A").format(
                PromQueryFormat.TABLE
            )
        )
    )


def _board(uid: str, title: str, description: str, team_variable: bool) -> dash.Dashboard:
    board = (
        dash.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(TAGS)
        .refresh("1m")
        .time("now-7d", "now")
        .timezone("utc")
        .with_variable(dash.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
    )
    if team_variable:
        board = board.with_variable(
            dash.QueryVariable("team")
            .label("Team")
            .datasource(DATASOURCE)
            .query("label_values(fleetplane_team_budget_usd, team)")
            .multi(True)
            .include_all(True)
            .all_value(".+")
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        )
    return board


def fleet_dashboard() -> dash.Dashboard:
    return (
        _board(
            "fleetplane-fleet",
            "fleetplane / Fleet",
            "Accelerators by pool, model and state; utilisation; GPU faults.",
            team_variable=False,
        )
        .with_row(dash.Row("Accelerators"))
        .with_panel(
            _stat(
                "Accelerators in use",
                "percentunit",
                Query(
                    'sum(fleetplane_pool_accelerators{state="in-use"}) '
                    '/ sum(fleetplane_pool_accelerators{state="allocatable"})'
                ),
            )
        )
        .with_panel(
            _stat(
                "Accelerators unavailable (cordoned, NotReady)",
                "none",
                Query('sum(fleetplane_pool_accelerators{state="unavailable"}) or vector(0)'),
            )
        )
        .with_panel(
            _table(
                "Accelerators by pool, model and state",
                "none",
                Query("sum by (pool, model, capacity_type, state) (fleetplane_pool_accelerators)"),
            )
        )
        .with_panel(
            _series(
                "In use by pool",
                "none",
                Query('sum by (pool) (fleetplane_pool_accelerators{state="in-use"})', "{{pool}}"),
            )
        )
        .with_panel(
            _series(
                "Fragmented share by pool",
                "percentunit",
                Query(
                    "sum by (pool, resource) (fleetplane_pool_fragmented_accelerators) / sum by "
                    '(pool, resource) (fleetplane_pool_accelerators{state="allocatable"} > 0)',
                    "{{pool}} {{resource}}",
                ),
                description="Free accelerators the fleet's typical pods cannot use, over the "
                "pool's allocatable ones (the controller's fragmentation concern; "
                "FleetplanePoolGpusFragmented fires above observability."
                "fragmented_gpus_alert_share).",
            )
        )
        .with_row(dash.Row("Utilisation"))
        .with_panel(
            _series(
                "GPU utilisation by model",
                "percent",
                Query(
                    "avg by (modelName) (DCGM_FI_DEV_GPU_UTIL)",
                    "{{modelName}}",
                ),
            )
        )
        .with_panel(
            _series(
                "GPUs idle (utilisation under 5%) vs busy",
                "none",
                Query("count(DCGM_FI_DEV_GPU_UTIL < 5) or vector(0)", "idle"),
                Query("count(DCGM_FI_DEV_GPU_UTIL >= 5) or vector(0)", "busy"),
            )
        )
        .with_panel(
            _series(
                "Power draw",
                "watt",
                Query("sum by (modelName) (DCGM_FI_DEV_POWER_USAGE)", "{{modelName}}"),
            )
        )
        .with_row(dash.Row("Faults"))
        .with_panel(
            _series(
                "Hottest GPU",
                "celsius",
                Query("max(DCGM_FI_DEV_GPU_TEMP)", "max temperature"),
            )
        )
        .with_panel(
            _table(
                "GPUs with an Xid error",
                "none",
                Query("max by (Hostname, gpu) (DCGM_FI_DEV_XID_ERRORS) > 0"),
                description="DCGM_FI_DEV_XID_ERRORS: the last Xid error code of the GPU.",
            )
        )
        .with_panel(
            _series(
                "Double-bit ECC errors (volatile)",
                "none",
                Query(
                    "sum by (Hostname, gpu) (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL)", "{{Hostname}}/{{gpu}}"
                ),
            )
        )
        .with_row(dash.Row("Driver upgrades and GPU remediation"))
        .with_panel(
            _table(
                "Driver upgrade: nodes by pool and state",
                "none",
                Query("sum by (pool, state) (fleetplane_controller_upgrade_states)"),
                description="The last upgrade pass (`fleetplane controller upgrade status`).",
            )
        )
        .with_panel(
            _series(
                "Driver rollouts halted",
                "none",
                Query("max by (pool) (fleetplane_controller_upgrade_halted)", "{{pool}}"),
                description="1 while a pool's rollout is halted by a node that failed.",
            )
        )
        .with_panel(
            _table(
                "GPU remediation: nodes by pool and state",
                "none",
                Query("sum by (pool, state) (fleetplane_controller_health_states)"),
                description="The last health pass (`fleetplane controller remediation status`).",
            )
        )
        .with_panel(
            _stat(
                "GPU nodes needing replacement",
                "none",
                Query(
                    'sum(fleetplane_controller_health_states{state="needs-replacement"}) '
                    "or vector(0)"
                ),
            )
        )
    )


def teams_dashboard() -> dash.Dashboard:
    return (
        _board(
            "fleetplane-teams",
            "fleetplane / Teams",
            "Each team's share against its quota, utilisation, spend against budget, queue "
            "wait, and cost per training and inference GPU-hour.",
            team_variable=True,
        )
        .with_row(dash.Row("Share"))
        .with_panel(
            _series(
                "Accelerators held vs quota",
                "none",
                Query(
                    f'sum by (team) (fleetplane_team_gpus{{state="held",{TEAM}}})', "{{team}} held"
                ),
                Query(f"sum by (team) (fleetplane_team_quota_gpus{{{TEAM}}})", "{{team}} quota"),
            )
        )
        .with_panel(
            _series(
                "Accelerators idle and pending",
                "none",
                Query(
                    f'sum by (team, state) (fleetplane_team_gpus{{state=~"idle|pending",{TEAM}}})',
                    "{{team}} {{state}}",
                ),
            )
        )
        .with_row(dash.Row("Utilisation"))
        .with_panel(
            _series(
                "GPU utilisation (average)",
                "percent",
                Query(f"avg by (team) ({TEAM_UTIL})", "{{team}}"),
            )
        )
        .with_panel(
            _table(
                "Utilisation over the range: average and peak",
                "percent",
                # the subquery steps at Grafana's interval: a fixed step (5 m) finds no point in
                # a range shorter than it, such as a fleet's first minutes
                Query(
                    f"label_replace(avg by (team) (avg_over_time(({TEAM_UTIL})"
                    '[$__range:$__interval])), "stat", "average", "", "") or label_replace(max by '
                    f"(team) (max_over_time(({TEAM_UTIL})[$__range:$__interval])), "
                    '"stat", "peak", "", "")'
                ),
            )
        )
        .with_row(dash.Row("Money"))
        .with_panel(
            _series(
                "Spend vs budget (month to date)",
                "currencyUSD",
                Query(f"max by (team) (fleetplane_team_spend_usd{{{TEAM}}})", "{{team}} spend"),
                Query(f"max by (team) (fleetplane_team_budget_usd{{{TEAM}}})", "{{team}} budget"),
            )
        )
        .with_panel(
            _series(
                "Cost per training and inference GPU-hour",
                "currencyUSD",
                Query(
                    "sum by (team, workload_type) (fleetplane_team_cost_usd_per_hour"
                    f'{{workload_type=~"training|inference",{TEAM}}}) / sum by (team, '
                    'workload_type) (fleetplane_team_gpus{state="held",'
                    f'workload_type=~"training|inference",{TEAM}}})',
                    "{{team}} {{workload_type}}",
                ),
            )
        )
        .with_panel(
            _series(
                "Burn rate by workload type",
                "currencyUSD",
                Query(
                    f"sum by (team, workload_type) (fleetplane_team_cost_usd_per_hour{{{TEAM}}})",
                    "{{team}} {{workload_type}} /h",
                ),
            )
        )
        .with_row(dash.Row("Waiting"))
        .with_panel(
            _series(
                "Queue wait p95 (1h)",
                "s",
                Query(
                    "histogram_quantile(0.95, sum by (team, le) "
                    f"(increase(fleetplane_queue_wait_seconds_bucket{{{TEAM}}}[1h])))",
                    "{{team}} p95",
                ),
            )
        )
        .with_panel(
            _series(
                "Oldest pending workload",
                "s",
                Query(
                    f"max by (team) (fleetplane_queue_oldest_wait_seconds{{{TEAM}}})",
                    "{{team}}",
                ),
            )
        )
    )


def controller_dashboard() -> dash.Dashboard:
    return (
        _board(
            "fleetplane-controller",
            "fleetplane / Controller",
            "The controller's passes, decisions and what its reclaims took back.",
            team_variable=False,
        )
        .with_row(dash.Row("Passes"))
        .with_panel(
            _series(
                "Passes per hour by outcome",
                "none",
                Query(
                    "sum by (outcome) (increase(fleetplane_controller_passes_total[1h]))",
                    "{{outcome}}",
                ),
            )
        )
        .with_panel(
            _series(
                "Pass duration",
                "s",
                Query("max(fleetplane_controller_pass_duration_seconds)", "pass"),
            )
        )
        .with_panel(
            _stat(
                "Since the last pass",
                "s",
                Query("time() - max(fleetplane_controller_last_pass_timestamp_seconds)"),
            )
        )
        .with_panel(
            _series(
                "Errors per hour",
                "none",
                Query(
                    "sum by (concern, kind) (increase(fleetplane_controller_errors_total[1h]))",
                    "{{concern}} {{kind}}",
                ),
            )
        )
        .with_row(dash.Row("Decisions"))
        .with_panel(
            _series(
                "Actions per hour",
                "none",
                Query(
                    'sum by (concern, action) (increase(fleetplane_controller_actions_total{outcome="done"}[1h]))',
                    "{{concern}} {{action}}",
                ),
            )
        )
        .with_panel(
            _series(
                "Refusals per hour by reason",
                "none",
                Query(
                    "sum by (concern, action, reason) "
                    "(increase(fleetplane_controller_refusals_total[1h]))",
                    "{{concern}} {{action}}: {{reason}}",
                ),
            )
        )
        .with_row(dash.Row("Reclaimed"))
        .with_panel(
            _stat(
                "GPU-hours reclaimed over the range",
                "none",
                Query("sum(increase(fleetplane_team_reclaimed_gpu_hours_total[$__range]))"),
            )
        )
        .with_panel(
            _stat(
                "Spend avoided over the range",
                "currencyUSD",
                Query("sum(increase(fleetplane_team_reclaim_savings_usd_total[$__range]))"),
            )
        )
        .with_panel(
            _series(
                "Reclaimed GPU-hours by team",
                "none",
                Query(
                    "sum by (team) (increase(fleetplane_team_reclaimed_gpu_hours_total[1h]))",
                    "{{team}}",
                ),
            )
        )
    )


def dashboards() -> dict[str, dict[str, Any]]:
    """Each dashboard's JSON model, by file name."""
    built = {
        "fleetplane-fleet.json": fleet_dashboard(),
        "fleetplane-teams.json": teams_dashboard(),
        "fleetplane-controller.json": controller_dashboard(),
    }
    return {
        name: json.loads(json.dumps(board.build(), cls=JSONEncoder))
        for name, board in built.items()
    }


def panel_queries(model: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of every panel of a dashboard's JSON model."""
    found: list[tuple[str, str]] = []
    panels = list(model.get("panels") or [])
    while panels:
        panel = panels.pop(0)
        panels.extend(panel.get("panels") or [])
        for target in panel.get("targets") or []:
            if target.get("expr"):
                found.append((str(panel.get("title")), str(target["expr"])))
    return found
