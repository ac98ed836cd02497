"""The monthly chargeback: per team, from Prometheus alone (the controller's metrics and the
DCGM series), as CSV, Markdown and one self-contained HTML page with inline SVG charts.

How each figure is computed (R: the month so far, from its first second (UTC) to its end or
now; S: the controller's period, the step at which the burn rate is sampled):

- GPU-hours and cost by team x workload type x model x capacity type: the integral over R of
  `fleetplane_team_gpus{state="held"}` and `fleetplane_team_cost_usd_per_hour`, sampled every
  S (`sum_over_time(...[R:S]) * S / 3600`);
- the bill: the controller's month-to-date spend per team (`fleetplane_team_spend_usd`, last
  value in R; what OPA's budget rule sees), allocated over the rows in proportion to their
  integrated cost, to the cent (largest remainder). The integral and the bill differ by what the
  report states: the spend counts a pod up to the last pass that saw it, and the integral also
  counts the period after each sample; pods deleted between passes, and the last pass's period,
  make the difference;
- utilisation average and peak: DCGM_FI_DEV_GPU_UTIL of the team's pods (via
  `fleetplane_namespace_team`), averaged and maximised over R;
- burst GPU-hours, per tier: the integral of `fleetplane_team_burst_gpus` (the accelerators a
  team's running pods hold on burst nodes, which carry the label `fleetplane.dev/burst-tier`:
  capacity beyond the team's reservation it was let onto by the burst policy);
- idle GPU-hours: the integral of `fleetplane_team_gpus{state="idle"}`; reclaimed GPU-hours and
  the spend it avoided: the increase of the controller's counters over R;
- cost per training / inference GPU-hour: integrated cost over GPU-hours of that type;
- queue wait p50/p95: `histogram_quantile` over the increase of `fleetplane_queue_wait_seconds`;
- inference availability: running inference pods over running + pending, sampled every S;
- energy: the integral of DCGM_FI_DEV_POWER_USAGE of the team's pods (kWh); emissions: energy x
  the grid carbon intensity of the cluster's region (configuration, else the catalog's cited
  default); per training GPU-hour: the team's emissions allocated to training by its share of
  GPU-hours.
"""

from __future__ import annotations

import csv
import datetime as dt
import html
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from fleet.config import FleetConfig

TEAM_UTIL = (
    'DCGM_FI_DEV_GPU_UTIL{namespace!=""} * on (namespace) group_left (team) '
    "fleetplane_namespace_team"
)
TEAM_POWER = (
    'DCGM_FI_DEV_POWER_USAGE{namespace!=""} * on (namespace) group_left (team) '
    "fleetplane_namespace_team"
)
ROW_KEYS = ("team", "workload_type", "model", "capacity_type")


class ReportError(RuntimeError):
    """Prometheus could not be read, or rejected a query; the message says which."""


@dataclass(frozen=True)
class Month:
    name: str
    start: float
    end: float

    @classmethod
    def parse(cls, name: str) -> Month:
        moment = dt.datetime.strptime(name, "%Y-%m").replace(tzinfo=dt.UTC)
        following = dt.datetime(
            moment.year + moment.month // 12, moment.month % 12 + 1, 1, tzinfo=dt.UTC
        )
        return cls(name, moment.timestamp(), following.timestamp())

    @classmethod
    def of(cls, at: float) -> Month:
        return cls.parse(dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m"))


@dataclass
class Row:
    team: str
    workload_type: str
    model: str
    capacity_type: str
    gpu_hours: float = 0.0
    cost_usd: float = 0.0
    billed_usd: float = 0.0


@dataclass
class TeamFigures:
    team: str
    budget_usd: float = 0.0
    spend_usd: float = 0.0
    integrated_usd: float = 0.0
    gpu_hours: float = 0.0
    util_avg: float | None = None
    util_peak: float | None = None
    idle_gpu_hours: float = 0.0
    burst_gpu_hours: dict[str, float] = field(default_factory=dict)
    """Per burst tier (on-demand, spot)."""
    reclaimed_gpu_hours: float = 0.0
    reclaim_savings_usd: float = 0.0
    cost_per_training_hour: float | None = None
    cost_per_inference_hour: float | None = None
    wait_p50: float | None = None
    wait_p95: float | None = None
    inference_availability: float | None = None
    energy_kwh: float = 0.0
    emissions_kg: float = 0.0
    emissions_per_training_hour_g: float | None = None


@dataclass
class Report:
    month: Month
    until: float
    step_seconds: int
    region: str
    carbon_g_per_kwh: float
    carbon_source: str
    inference_target: float
    rows: list[Row] = field(default_factory=list)
    teams: dict[str, TeamFigures] = field(default_factory=dict)

    @property
    def total_billed(self) -> float:
        return round(sum(t.spend_usd for t in self.teams.values()), 2)

    @property
    def total_integrated(self) -> float:
        return sum(t.integrated_usd for t in self.teams.values())


class _Prometheus:
    def __init__(self, url: str, timeout: float = 60) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def vector(self, promql: str, at: float) -> list[tuple[dict[str, str], float]]:
        try:
            response = requests.post(
                f"{self.url}/api/v1/query",
                data={"query": promql, "time": f"{at:.3f}"},
                timeout=self.timeout,
            )
            body = response.json()
        except (requests.RequestException, ValueError) as error:
            raise ReportError(f"prometheus {self.url}: {error}") from error
        if body.get("status") != "success":
            raise ReportError(f"prometheus {self.url}: query {promql!r}: {body.get('error')}")
        out = []
        for series in body["data"]["result"]:
            value = float(series["value"][1])
            if math.isfinite(value):
                out.append((dict(series["metric"]), value))
        return out


def build_report(
    prometheus_url: str,
    config: FleetConfig,
    month: Month,
    *,
    now: float | None = None,
    cluster: str | None = None,
) -> Report:
    """Read the month from Prometheus; ReportError when it cannot be read."""
    import time

    now = time.time() if now is None else now
    until = min(month.end, now)
    if until <= month.start:
        raise ReportError(f"month {month.name} has not started")
    step = config.controller.period_seconds
    # The range ends at `until`; its start is the month's first second (seconds, whole steps).
    span = int(until - month.start)
    window = f"{span}s"
    sampled = f"[{window}:{step}s]"
    hours = step / 3600.0
    chosen = next((c for c in config.clusters if c.name == cluster), config.clusters[0])
    carbon, source = config.observability.carbon_intensity(chosen.region)
    report = Report(
        month=month,
        until=until,
        step_seconds=step,
        region=chosen.region or "(none)",
        carbon_g_per_kwh=carbon,
        carbon_source=source,
        inference_target=config.observability.inference_availability_target,
    )
    prom = _Prometheus(prometheus_url)

    def per_team(promql: str) -> dict[str, float]:
        return {labels.get("team", ""): value for labels, value in prom.vector(promql, until)}

    rows: dict[tuple[str, ...], Row] = {}
    keys = ", ".join(ROW_KEYS)
    for labels, value in prom.vector(
        f'sum by ({keys}) (sum_over_time(fleetplane_team_gpus{{state="held"}}{sampled}))', until
    ):
        key = tuple(labels.get(k, "") for k in ROW_KEYS)
        rows.setdefault(key, Row(key[0], key[1], key[2], key[3])).gpu_hours = value * hours
    for labels, value in prom.vector(
        f"sum by ({keys}) (sum_over_time(fleetplane_team_cost_usd_per_hour{sampled}))", until
    ):
        key = tuple(labels.get(k, "") for k in ROW_KEYS)
        rows.setdefault(key, Row(key[0], key[1], key[2], key[3])).cost_usd = value * hours
    report.rows = sorted(rows.values(), key=lambda r: (r.team, r.workload_type, r.model))

    spend = per_team(f"max by (team) (last_over_time(fleetplane_team_spend_usd[{window}]))")
    budget = per_team(f"max by (team) (last_over_time(fleetplane_team_budget_usd[{window}]))")
    names = sorted({t.name for t in config.teams} | set(spend) | {r.team for r in report.rows})
    for name in names:
        figures = TeamFigures(team=name, budget_usd=budget.get(name, 0.0))
        figures.spend_usd = round(spend.get(name, 0.0), 2)
        team_rows = [r for r in report.rows if r.team == name]
        figures.integrated_usd = sum(r.cost_usd for r in team_rows)
        figures.gpu_hours = sum(r.gpu_hours for r in team_rows)
        _allocate(figures.spend_usd, team_rows)
        for kind in ("training", "inference"):
            of_kind = [r for r in team_rows if r.workload_type == kind]
            gpu_hours = sum(r.gpu_hours for r in of_kind)
            if gpu_hours > 0:
                setattr(
                    figures, f"cost_per_{kind}_hour", sum(r.cost_usd for r in of_kind) / gpu_hours
                )
        report.teams[name] = figures

    def fill(attribute: str, promql: str, scale: float = 1.0) -> None:
        for team, value in per_team(promql).items():
            if team in report.teams:
                setattr(report.teams[team], attribute, value * scale)

    fill("util_avg", f"avg by (team) (avg_over_time(({TEAM_UTIL}){sampled}))")
    fill("util_peak", f"max by (team) (max_over_time(({TEAM_UTIL}){sampled}))")
    fill(
        "idle_gpu_hours",
        f'sum by (team) (sum_over_time(fleetplane_team_gpus{{state="idle"}}{sampled}))',
        hours,
    )
    for labels, value in prom.vector(
        f"sum by (team, tier) (sum_over_time(fleetplane_team_burst_gpus{sampled}))", until
    ):
        found = report.teams.get(labels.get("team", ""))
        if found is not None and value > 0:
            found.burst_gpu_hours[labels.get("tier", "")] = value * hours
    fill(
        "reclaimed_gpu_hours",
        f"sum by (team) (increase(fleetplane_team_reclaimed_gpu_hours_total[{window}]))",
    )
    fill(
        "reclaim_savings_usd",
        f"sum by (team) (increase(fleetplane_team_reclaim_savings_usd_total[{window}]))",
    )
    for attribute, quantile in (("wait_p50", 0.5), ("wait_p95", 0.95)):
        fill(
            attribute,
            f"histogram_quantile({quantile}, sum by (team, le) "
            f"(increase(fleetplane_queue_wait_seconds_bucket[{window}])))",
        )
    fill(
        "inference_availability",
        'sum by (team) (sum_over_time(fleetplane_team_pods{workload_type="inference",'
        f'state="running"}}{sampled})) / sum by (team) (sum_over_time(fleetplane_team_pods'
        f'{{workload_type="inference"}}{sampled}))',
    )
    fill("energy_kwh", f"sum by (team) (sum_over_time(({TEAM_POWER}){sampled}))", hours / 1000)
    for figures in report.teams.values():
        figures.emissions_kg = figures.energy_kwh * carbon / 1000
        training = sum(
            r.gpu_hours
            for r in report.rows
            if r.team == figures.team and r.workload_type == "training"
        )
        if training > 0 and figures.gpu_hours > 0:
            share = training / figures.gpu_hours
            figures.emissions_per_training_hour_g = figures.emissions_kg * 1000 * share / training
    return report


def _allocate(total: float, rows: list[Row]) -> None:
    """Split `total` (USD, to the cent) over rows in proportion to their integrated cost, by
    largest remainder, so the rows add up to `total` exactly."""
    cents = round(total * 100)
    weights = [max(r.cost_usd, 0.0) for r in rows]
    whole = sum(weights)
    if not rows:
        return
    if whole <= 0:
        weights = [1.0] * len(rows)
        whole = float(len(rows))
    shares = [cents * w / whole for w in weights]
    floors = [math.floor(s) for s in shares]
    left = cents - sum(floors)
    order = sorted(range(len(rows)), key=lambda i: shares[i] - floors[i], reverse=True)
    for i in order[:left]:
        floors[i] += 1
    for row, value in zip(rows, floors, strict=True):
        row.billed_usd = value / 100


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


def _num(value: float | None, digits: int = 1, suffix: str = "") -> str:
    return "-" if value is None else f"{value:,.{digits}f}{suffix}"


def _burst(by_tier: dict[str, float]) -> str:
    """Burst GPU-hours per tier, cheapest first ("-" without any)."""
    order = ("on-demand", "spot")
    tiers = sorted(by_tier, key=lambda t: (order.index(t) if t in order else len(order), t))
    return ", ".join(f"{_num(by_tier[t])} {t}" for t in tiers) or "-"


def _duration(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 60:,.1f} min" if value >= 60 else f"{value:.0f} s"


def to_csv(report: Report) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["month", *ROW_KEYS, "gpu_hours", "integrated_cost_usd", "billed_usd"])
    for row in report.rows:
        writer.writerow(
            [
                report.month.name,
                row.team,
                row.workload_type,
                row.model,
                row.capacity_type,
                f"{row.gpu_hours:.3f}",
                f"{row.cost_usd:.4f}",
                f"{row.billed_usd:.2f}",
            ]
        )
    return out.getvalue()


def _reconciliation(report: Report) -> list[str]:
    difference = report.total_integrated - report.total_billed
    return [
        f"Billed (the controller's month-to-date spend, as OPA's budget rule sees it): "
        f"{_money(report.total_billed)}. Integrated from the burn rate every "
        f"{report.step_seconds} s: {_money(report.total_integrated)}; difference "
        f"{_money(difference)}.",
        "The bill is the controller's spend, allocated over the rows in proportion to their "
        "integrated cost, so each team's rows add up to its spend to the cent. The two differ "
        "because the spend counts a pod up to the last pass that saw it (a pod deleted between "
        "passes loses at most one period), while the integral counts the period after each "
        "sample, including the last pass's; a pass that did not run leaves a gap in both.",
    ]


def team_table(report: Report) -> list[list[str]]:
    header = [
        "team",
        "billed",
        "budget",
        "GPU-hours",
        "util avg / peak",
        "idle GPU-h",
        "burst GPU-h",
        "reclaimed GPU-h (avoided)",
        "$/training GPU-h",
        "$/inference GPU-h",
        "wait p50 / p95",
        "inference availability",
        "energy kWh",
        "kgCO2e",
        "gCO2e/training GPU-h",
    ]
    rows = [header]
    for t in report.teams.values():
        availability = "-"
        if t.inference_availability is not None:
            verdict = "meets" if t.inference_availability >= report.inference_target else "misses"
            availability = (
                f"{t.inference_availability:.4%} ({verdict} {report.inference_target:.2%})"
            )
        rows.append(
            [
                t.team,
                _money(t.spend_usd),
                _money(t.budget_usd),
                _num(t.gpu_hours),
                f"{_num(t.util_avg, 0, '%')} / {_num(t.util_peak, 0, '%')}",
                _num(t.idle_gpu_hours),
                _burst(t.burst_gpu_hours),
                f"{_num(t.reclaimed_gpu_hours)} ({_money(t.reclaim_savings_usd)})",
                _money(t.cost_per_training_hour),
                _money(t.cost_per_inference_hour),
                f"{_duration(t.wait_p50)} / {_duration(t.wait_p95)}",
                availability,
                _num(t.energy_kwh),
                _num(t.emissions_kg),
                _num(t.emissions_per_training_hour_g, 0),
            ]
        )
    return rows


def _notes(report: Report) -> list[str]:
    until = dt.datetime.fromtimestamp(report.until, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return [
        f"Period: {report.month.name}, to {until}.",
        f"Carbon intensity: {report.carbon_g_per_kwh:g} gCO2e/kWh for region {report.region} "
        f"({report.carbon_source}). Emissions per training GPU-hour allocate a team's "
        "energy to training by its share of GPU-hours.",
        "Reclaimed GPU-hours and spend avoided are the controller's estimate: one more idle "
        "window of each reclaimed workload at its price.",
    ]


def to_markdown(report: Report) -> str:
    def table(rows: list[list[str]]) -> list[str]:
        lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
        lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        return lines

    detail = [["team", "workload type", "model", "capacity", "GPU-hours", "integrated", "billed"]]
    for row in report.rows:
        detail.append(
            [
                row.team,
                row.workload_type,
                row.model or "-",
                row.capacity_type or "-",
                _num(row.gpu_hours, 2),
                _money(row.cost_usd),
                _money(row.billed_usd),
            ]
        )
    lines = [f"# GPU chargeback, {report.month.name}", ""]
    lines += [f"- {note}" for note in _notes(report)]
    lines += ["", "## Teams", "", *table(team_table(report)), ""]
    lines += ["## By team, workload type, model and capacity type", "", *table(detail), ""]
    lines += ["## Reconciliation", "", *_reconciliation(report), ""]
    return "\n".join(lines)


PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1")


def _bar_chart(title: str, bars: list[tuple[str, list[tuple[str, float]]]], unit: str) -> str:
    """A horizontal stacked bar chart as inline SVG: one bar per label, segments by key."""
    keys = sorted({k for _, segments in bars for k, _ in segments})
    colours = {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(keys)}
    top = max([sum(v for _, v in segments) for _, segments in bars] + [1e-9])
    width, left, bar_h, gap = 720, 110, 26, 12
    height = 40 + len(bars) * (bar_h + gap) + 30
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" class="chart" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}">',
        f"<title>{html.escape(title)}</title>",
        f'<text x="0" y="18" font-size="15" font-weight="bold">{html.escape(title)}</text>',
    ]
    for index, (label, segments) in enumerate(bars):
        y = 36 + index * (bar_h + gap)
        parts.append(
            f'<text x="0" y="{y + bar_h * 0.7:.0f}" font-size="13">{html.escape(label)}</text>'
        )
        x = float(left)
        total = 0.0
        for key, value in segments:
            w = (width - left - 120) * value / top
            parts.append(
                f'<rect x="{x:.1f}" y="{y}" width="{max(w, 0):.1f}" height="{bar_h}" '
                f'fill="{colours[key]}"><title>{html.escape(key)}: {value:,.2f} {unit}</title></rect>'
            )
            x += w
            total += value
        parts.append(
            f'<text x="{x + 6:.1f}" y="{y + bar_h * 0.7:.0f}" font-size="12">'
            f"{total:,.1f} {html.escape(unit)}</text>"
        )
    legend_y = height - 12
    x = float(left)
    for key in keys:
        parts.append(
            f'<rect x="{x:.0f}" y="{legend_y - 10}" width="12" height="12" fill="{colours[key]}"/>'
        )
        parts.append(
            f'<text x="{x + 16:.0f}" y="{legend_y}" font-size="12">{html.escape(key)}</text>'
        )
        x += 24 + 8 * len(key)
    parts.append("</svg>")
    return "".join(parts)


def to_html(report: Report) -> str:
    teams = sorted(report.teams)
    by_type_cost = [
        (t, [(r.workload_type, r.billed_usd) for r in report.rows if r.team == t]) for t in teams
    ]
    by_capacity_hours = [
        (
            t,
            [(f"{r.model} {r.capacity_type}", r.gpu_hours) for r in report.rows if r.team == t],
        )
        for t in teams
    ]
    utilisation = [(t, [("average", report.teams[t].util_avg or 0.0)]) for t in teams]
    charts = [
        _bar_chart("Billed cost by team and workload type", by_type_cost, "USD"),
        _bar_chart("GPU-hours by team, model and capacity type", by_capacity_hours, "GPU-h"),
        _bar_chart("GPU utilisation (average)", utilisation, "%"),
    ]

    def table(rows: list[list[str]]) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
            for row in rows[1:]
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    detail = [["team", "workload type", "model", "capacity", "GPU-hours", "integrated", "billed"]]
    detail += [
        [
            r.team,
            r.workload_type,
            r.model or "-",
            r.capacity_type or "-",
            _num(r.gpu_hours, 2),
            _money(r.cost_usd),
            _money(r.billed_usd),
        ]
        for r in report.rows
    ]
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in _notes(report))
    reconciliation = "".join(f"<p>{html.escape(p)}</p>" for p in _reconciliation(report))
    style = (
        "body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;"
        "margin:12px 0;font-size:13px}th,td{border:1px solid #ccc;padding:4px 8px;"
        "text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}"
        ".charts svg{display:block;margin:16px 0}"
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>GPU chargeback {report.month.name}</title><style>{style}</style></head><body>"
        f"<h1>GPU chargeback, {report.month.name}</h1><ul>{notes}</ul>"
        f'<div class="charts">{"".join(charts)}</div>'
        f"<h2>Teams</h2>{table(team_table(report))}"
        f"<h2>By team, workload type, model and capacity type</h2>{table(detail)}"
        f"<h2>Reconciliation</h2>{reconciliation}</body></html>\n"
    )


def write_report(report: Report, out: Path) -> dict[str, Path]:
    """report-<month>.csv, .md and .html in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for suffix, render in (("csv", to_csv), ("md", to_markdown), ("html", to_html)):
        path = out / f"report-{report.month.name}.{suffix}"
        path.write_text(render(report), encoding="utf-8")
        written[suffix] = path
    return written


def as_dict(report: Report) -> dict[str, Any]:
    return {
        "month": report.month.name,
        "billed_usd": report.total_billed,
        "integrated_usd": round(report.total_integrated, 4),
        "teams": {name: vars(t) for name, t in report.teams.items()},
    }
