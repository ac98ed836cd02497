"""The replay's report: `report.md` with PNG plots, and `figures.json` with every figure."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from replay.results import CPU_ONLY
from replay.workloads import WORKLOAD_TYPES

COLOURS = {
    "billed": "#c7c7c7",
    "allocated": "#4c78a8",
    "busy": "#54a24b",
    "pending": "#e45756",
    "on_demand": "#4c78a8",
    "spot": "#f58518",
    "reclaimed": "#54a24b",
    "lost": "#e45756",
}
TYPE_COLOURS = {
    "training": "#4c78a8",
    "inference": "#f58518",
    "notebook": "#54a24b",
    "batch": "#b279a2",
}


def write(out: Path, document: dict[str, Any]) -> dict[str, Path]:
    """Write the report, its plots and the JSON figures under `out`; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": out / "figures.json",
        "cost": out / "cost.png",
        "ratios": out / "utilisation.png",
        "timeline": out / "fleet-over-time.png",
        "daily": out / "ratios-over-time.png",
        "waits": out / "queue-wait.png",
        "disruptions": out / "reclaimed-and-lost.png",
        "calibration": out / "calibration.png",
        "report": out / "report.md",
    }
    paths["json"].write_text(json.dumps(document, indent=1, sort_keys=False) + "\n")
    scenarios = document["scenarios"]
    _cost(paths["cost"], scenarios)
    _ratios(paths["ratios"], scenarios)
    _timeline(paths["timeline"], scenarios)
    _daily(paths["daily"], scenarios)
    _waits(paths["waits"], scenarios)
    _disruptions(paths["disruptions"], scenarios)
    _calibration(paths["calibration"], document["calibration"])
    paths["report"].write_text(markdown(document, {k: p.name for k, p in paths.items()}))
    return paths


# --------------------------------------------------------------------------- plots


def _labels(scenarios: list[dict[str, Any]]) -> list[str]:
    return [f"{i + 1}. {s['name']}" for i, s in enumerate(scenarios)]


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _cost(path: Path, scenarios: list[dict[str, Any]]) -> None:
    labels = _labels(scenarios)
    on_demand = [s["cost_usd"]["on_demand"] / 1000 for s in scenarios]
    spot = [s["cost_usd"]["spot"] / 1000 for s in scenarios]
    base = scenarios[0]["cost_usd"]["total"] or 1.0
    fig, ax = plt.subplots(figsize=(8, 3.8))
    ax.barh(labels, on_demand, color=COLOURS["on_demand"], label="on-demand")
    ax.barh(labels, spot, left=on_demand, color=COLOURS["spot"], label="spot")
    for y, s in enumerate(scenarios):
        total = s["cost_usd"]["total"]
        change = "" if y == 0 else f"  ({(total / base - 1) * 100:+.0f}% vs 1)"
        ax.text(total / 1000, y, f"  ${total / 1000:,.0f}k{change}", va="center", fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("GPU bill over the window, thousand USD")
    ax.set_xlim(0, max(s["cost_usd"]["total"] for s in scenarios) / 1000 * 1.45)
    ax.legend(loc="lower right", frameon=False)
    ax.set_title("What the fleet costs")
    ax.spines[["top", "right"]].set_visible(False)
    _save(fig, path)


def _ratios(path: Path, scenarios: list[dict[str, Any]]) -> None:
    labels = _labels(scenarios)
    allocation = [s["ratios"]["allocation"] * 100 for s in scenarios]
    busy = [s["ratios"]["busy"] * 100 for s in scenarios]
    x = range(len(scenarios))
    fig, ax = plt.subplots(figsize=(8, 3.8))
    width = 0.38
    bars = ax.bar([i - width / 2 for i in x], allocation, width, color=COLOURS["allocated"])
    bars2 = ax.bar([i + width / 2 for i in x], busy, width, color=COLOURS["busy"])
    for bar, value in [*zip(bars, allocation, strict=True), *zip(bars2, busy, strict=True)]:
        ax.text(
            bar.get_x() + bar.get_width() / 2, value + 1, f"{value:.0f}%", ha="center", fontsize=9
        )
    ax.set_xticks(list(x), labels)
    ax.set_ylim(0, 110)
    ax.set_ylabel("% of provisioned GPU-hours")
    ax.legend(
        [bars, bars2],
        ["allocated to a pod", "busy (utilisation > 0)"],
        loc="upper left",
        frameon=False,
        ncol=2,
    )
    ax.set_title("How much of what is paid for is used")
    ax.spines[["top", "right"]].set_visible(False)
    _save(fig, path)


def _timeline(path: Path, scenarios: list[dict[str, Any]]) -> None:
    fig, axes = plt.subplots(
        len(scenarios), 1, figsize=(10, 1.9 * len(scenarios) + 0.9), sharex=True, sharey=True
    )
    if len(scenarios) == 1:
        axes = [axes]
    for ax, s, label in zip(axes, scenarios, _labels(scenarios), strict=True):
        series = s["series"]
        days = [h / 24 for h in series["hour"]]
        on_demand = [b - sp for b, sp in zip(series["billed"], series["spot"], strict=True)]
        ax.fill_between(days, on_demand, color=COLOURS["billed"], step="mid", lw=0)
        ax.fill_between(days, on_demand, series["billed"], color="#fbd5b0", step="mid", lw=0)
        ax.plot(days, series["allocated"], color=COLOURS["allocated"], lw=0.8)
        ax.plot(days, series["busy"], color=COLOURS["busy"], lw=0.8)
        ax.plot(days, series["pending_gpus"], color=COLOURS["pending"], lw=0.7)
        ax.set_ylabel("GPUs")
        ax.text(0.005, 0.86, label, transform=ax.transAxes, fontsize=9, weight="bold")
        ax.spines[["top", "right"]].set_visible(False)
    axes[-1].set_xlabel("day of the trace")
    handles = [
        plt.Rectangle((0, 0), 1, 1, color=COLOURS["billed"]),
        plt.Rectangle((0, 0), 1, 1, color="#fbd5b0"),
        plt.Line2D([], [], color=COLOURS["allocated"]),
        plt.Line2D([], [], color=COLOURS["busy"]),
        plt.Line2D([], [], color=COLOURS["pending"]),
    ]
    fig.suptitle("GPUs over time (hourly means)", fontsize=11)
    fig.legend(
        handles,
        ["on-demand paid for", "spot paid for", "allocated", "busy", "waiting (GPUs asked)"],
        loc="upper center",
        bbox_to_anchor=(0.5, 0.965),
        ncol=5,
        frameon=False,
        fontsize=9,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.955))
    fig.savefig(path, dpi=110)
    plt.close(fig)


SCENARIO_COLOURS = ("#7f7f7f", "#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2")


def _daily(path: Path, scenarios: list[dict[str, Any]]) -> None:
    """Allocation and busy ratios per day, one line per scenario."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
    for k, (s, label) in enumerate(zip(scenarios, _labels(scenarios), strict=True)):
        series = s["series"]
        days: dict[int, list[float]] = {}
        for hour, provisioned, allocated, busy in zip(
            series["hour"], series["provisioned"], series["allocated"], series["busy"], strict=True
        ):
            day = days.setdefault(int(hour // 24), [0.0, 0.0, 0.0])
            day[0] += provisioned
            day[1] += allocated
            day[2] += busy
        x = sorted(d for d in days if days[d][0] > 0)
        colour = SCENARIO_COLOURS[k % len(SCENARIO_COLOURS)]
        for ax, column in zip(axes, (1, 2), strict=True):
            ax.plot(
                x,
                [days[d][column] / days[d][0] * 100 for d in x],
                color=colour,
                lw=1.2,
                label=label,
            )
    for ax, title in zip(axes, ("allocated", "busy (utilisation > 0)"), strict=True):
        ax.set_title(f"{title}, % of GPU-hours of nodes up, per day")
        ax.set_xlabel("day of the trace")
        ax.set_ylim(0, 100)
        ax.spines[["top", "right"]].set_visible(False)
    axes[0].legend(frameon=False, fontsize=8, loc="lower left")
    _save(fig, path)


def _waits(path: Path, scenarios: list[dict[str, Any]]) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.6), sharey=True)
    x = range(len(scenarios))
    width = 0.8 / len(WORKLOAD_TYPES)
    for ax, quantile in zip(axes, ("p50", "p95", "p99"), strict=True):
        for k, kind in enumerate(WORKLOAD_TYPES):
            values = [s["queue_wait_seconds"][kind][quantile] / 60 for s in scenarios]
            ax.bar(
                [i + (k - 1.5) * width for i in x],
                values,
                width,
                color=TYPE_COLOURS[kind],
                label=kind,
            )
        ax.set_xticks(list(x), [str(i + 1) for i in x])
        ax.set_xlabel("scenario")
        ax.set_title(f"{quantile} wait")
        ax.spines[["top", "right"]].set_visible(False)
    axes[0].set_ylabel("minutes from submission to start")
    axes[0].legend(frameon=False, fontsize=8, loc="upper left")
    fig.suptitle("Queue wait by workload type (no bar: no wait)", fontsize=11)
    _save(fig, path)


def _disruptions(path: Path, scenarios: list[dict[str, Any]]) -> None:
    labels = _labels(scenarios)
    reclaimed = [s["reclaim"]["gpu_hours"] for s in scenarios]
    preempt = [s["preemption"]["work_lost_gpu_hours"] for s in scenarios]
    spot = [s["spot"]["work_lost_gpu_hours"] for s in scenarios]
    x = range(len(scenarios))
    fig, ax = plt.subplots(figsize=(8, 3.6))
    width = 0.27
    series = (
        (reclaimed, "idle GPU-hours reclaimed", COLOURS["reclaimed"]),
        (spot, "work lost to spot interruptions", COLOURS["spot"]),
        (preempt, "work lost to preemption", COLOURS["lost"]),
    )
    for k, (values, name, colour) in enumerate(series):
        bars = ax.bar([i + (k - 1) * width for i in x], values, width, color=colour, label=name)
        for bar, value in zip(bars, values, strict=True):
            if value:
                ax.text(
                    bar.get_x() + bar.get_width() / 2,
                    value,
                    f"{value:,.0f}",
                    ha="center",
                    va="bottom",
                    fontsize=8,
                )
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("GPU-hours")
    ax.legend(frameon=False, fontsize=9)
    ax.set_title("Reclaimed idle time against work lost")
    ax.spines[["top", "right"]].set_visible(False)
    _save(fig, path)


def _calibration(path: Path, calibration: dict[str, Any]) -> None:
    achieved = calibration["achieved"]
    cdf = achieved.get("cdf_percentiles") or []
    fig, ax = plt.subplots(figsize=(7, 3.4))
    if cdf:
        ax.plot(cdf, [i for i in range(len(cdf))], color=COLOURS["allocated"], lw=1.5)
    targets = calibration["targets"]
    mean = targets["pod_mean_util_percent"]["target"]
    median = targets["pod_median_util_percent"]["target"]
    ax.axvline(mean, color=COLOURS["spot"], ls="--", lw=1)
    ax.axvline(median, color=COLOURS["lost"], ls=":", lw=1)
    ax.axhline(targets["pods_at_zero"]["target"] * 100, color="grey", ls="-.", lw=0.8)
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlim(0, 100)
    ax.set_xlabel("pod's mean GPU utilisation over its life, % (symlog)")
    ax.set_ylabel("% of pods at or below")
    ax.legend(
        [
            "generated fleet",
            f"published mean {mean}%",
            f"published median {median}%",
            "published share at 0 %",
        ],
        frameon=False,
        fontsize=8,
        loc="lower right",
    )
    ax.set_title("Utilisation generator against the Alibaba PAI 2020 figures")
    ax.spines[["top", "right"]].set_visible(False)
    _save(fig, path)


# --------------------------------------------------------------------------- markdown


CALIBRATION_LABELS = {
    "pod_mean_util_percent": "mean of pods' lifetime utilisation",
    "pod_median_util_percent": "median of pods' lifetime utilisation",
    "pods_at_zero": "pods at 0 % all their life",
    "idle_share_of_reserved_gpu_time": "reserved GPU time fully idle",
}


def _money(x: float) -> str:
    return f"${x:,.0f}"


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def _minutes(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600 * 3:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def markdown(document: dict[str, Any], files: dict[str, str]) -> str:
    trace = document["trace"]
    scenarios = document["scenarios"]
    base = scenarios[0]
    lines: list[str] = []
    add = lines.append
    add("# Fleet replay: what the policies and the controller are worth")
    add("")
    add(
        f"The Alibaba GPU trace 2023 ({trace['gpu_pods']:,} GPU pods, {trace['days']:.0f} days) "
        f"replayed through {len(scenarios)} fleet configurations. Every admission, reclaim and "
        "preemption decision was made by the project's own OPA policies and the controller's own "
        "decision code; the fleet around them (scheduler, autoscaler, spot market) is a model. "
        f"Figures cover days {trace['window_days'][0]:.0f}-{trace['window_days'][1]:.0f} of the "
        f"trace, when {trace['pods_in_window']:,} of its pods arrived (see *The trace* below)."
    )
    add("")
    add("## The answer")
    add("")
    add(
        "| scenario | GPU bill | vs 1 | allocated | busy | $ per busy GPU-hour | wait p95 (all) "
        "| reclaimed GPU-h | preemptions | spot interruptions | denied | non-preemptible harmed |"
    )
    add("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for i, s in enumerate(scenarios):
        cost = s["cost_usd"]["total"]
        change = "—" if i == 0 else f"{(cost / base['cost_usd']['total'] - 1) * 100:+.0f}%"
        per_busy = s["cost_usd"]["per_busy_gpu_hour"]
        add(
            f"| {i + 1}. {s['title']} | {_money(cost)} | {change} "
            f"| {_pct(s['ratios']['allocation'])} | {_pct(s['ratios']['busy'])} "
            f"| {'—' if per_busy is None else f'${per_busy:.2f}'} "
            f"| {_minutes(s['queue_wait_seconds']['all']['p95'])} "
            f"| {s['reclaim']['gpu_hours']:,.0f} | {s['preemption']['victims']} "
            f"| {s['spot']['interruptions']} | {s['admission']['denied']} "
            f"| {s['harmed_non_preemptible']['count']} |"
        )
    add("")
    add(
        "*allocated*: GPU-hours held by pods over GPU-hours of nodes up; *busy*: GPU-hours at "
        "utilisation above 0 over the same. *GPU bill*: node-hours from request to removal at "
        "the configuration's on-demand and spot prices."
    )
    add("")
    for line in _reading(scenarios):
        add(f"- {line}")
    add("")
    add(_steps(scenarios))
    add("")
    add(_claims(scenarios))
    add("")
    add(f"![GPU bill]({files['cost']})")
    add("")
    add(f"![Allocated and busy]({files['ratios']})")
    add("")
    add(f"![GPUs over time]({files['timeline']})")
    add("")
    add(f"![Ratios over time]({files['daily']})")
    add("")
    add(f"![Queue waits]({files['waits']})")
    add("")
    add(f"![Reclaimed and lost]({files['disruptions']})")
    add("")
    add("## Scenarios")
    add("")
    for i, s in enumerate(scenarios):
        pools = ", ".join(
            f"{p['name']} ({p['capacity_type']}, {p['min_nodes']}-{p['max_nodes']} x "
            f"{p['gpus_per_node']} GPUs at ${p['usd_per_gpu_hour']}/GPU-h)"
            for p in s["fleet"]["pools"]
        )
        add(
            f"{i + 1}. **{s['title']}** (`{s['name']}`). {s['summary']} Pools: {pools}. "
            f"Controller: {', '.join(s['controller']) or 'none'}; queueing: {s['queueing']}."
        )
    add("")
    add("## Queue wait by workload type")
    add("")
    add("From submission to first start, in the window (p50 / p95 / p99).")
    add("")
    kinds = [*WORKLOAD_TYPES]
    if any(s["queue_wait_seconds"].get(CPU_ONLY, {}).get("count") for s in scenarios):
        kinds.append(CPU_ONLY)  # the trace's pods without GPUs
    add("| scenario | " + " | ".join(kinds) + " |")
    add("|---|" + "---:|" * len(kinds))
    for i, s in enumerate(scenarios):
        cells = []
        for kind in kinds:
            w = s["queue_wait_seconds"][kind]
            never = f", {w['never_started']} never started" if w["never_started"] else ""
            cells.append(
                f"{_minutes(w['p50'])} / {_minutes(w['p95'])} / {_minutes(w['p99'])} "
                f"(n={w['count']}{never})"
            )
        add(f"| {i + 1}. {s['name']} | " + " | ".join(cells) + " |")
    add("")
    add("## What the controller and the gate did")
    add("")
    add(
        "| scenario | idle warnings | reclaimed (owner came back) | reclaim denied by OPA "
        "| preemption victims (denied by OPA) | work lost to preemption | pods hit by spot "
        "| work lost to spot | admission denials by rule | budget warnings |"
    )
    add("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for i, s in enumerate(scenarios):
        r, p, sp, a = s["reclaim"], s["preemption"], s["spot"], s["admission"]
        rules = ", ".join(f"{k}: {v}" for k, v in a["denied_by_rule"].items()) or "none"
        add(
            f"| {i + 1}. {s['name']} | {r['warnings']} | {r['reclaimed']} "
            f"({r['owner_came_back']}) | {r['denied_by_policy']} "
            f"| {p['victims']} ({p['victims_denied_by_policy']}) "
            f"| {p['work_lost_gpu_hours']:,.1f} GPU-h | {sp['pods_interrupted']} "
            f"| {sp['work_lost_gpu_hours']:,.1f} GPU-h | {rules} "
            f"| {a['warnings_by_rule'].get('budget', 0)} |"
        )
    add("")
    harmed = [s for s in scenarios if s["harmed_non_preemptible"]["count"]]
    if harmed:
        add("**Non-preemptible pods were harmed:**")
        for s in harmed:
            for pod in s["harmed_non_preemptible"]["pods"]:
                add(f"- {s['name']}: {pod}")
    else:
        add(
            "No pod of a non-preemptible workload type (inference) was preempted, reclaimed or "
            "interrupted in any scenario."
        )
    add("")
    add("Month-to-date spend the controller published, at each month's end (USD):")
    add("")
    months = sorted({m for s in scenarios for t in s["spend_by_team_month"].values() for m in t})
    teams = sorted({t for s in scenarios for t in s["spend_by_team_month"]})
    add("| scenario | team | " + " | ".join(months) + " |")
    add("|---|---|" + "---:|" * len(months))
    for i, s in enumerate(scenarios):
        for team in teams:
            row = s["spend_by_team_month"].get(team, {})
            budget = s["fleet"]["teams"].get(team, {}).get("monthly_budget_usd")
            label = f"{team} (budget {_money(budget)})" if budget and budget < 1e6 else team
            add(
                f"| {i + 1}. {s['name']} | {label} | "
                + " | ".join(_money(row.get(m, 0.0)) for m in months)
                + " |"
            )
    add("")
    add(_assumptions(document, files))
    return "\n".join(lines) + "\n"


def _reading(scenarios: list[dict[str, Any]]) -> list[str]:
    """A few sentences read off the figures."""
    lines: list[str] = []
    steps = list(itertools.pairwise(scenarios))
    if steps:
        before, after = min(
            steps, key=lambda p: p[1]["cost_usd"]["total"] / (p[0]["cost_usd"]["total"] or 1)
        )
        change = after["cost_usd"]["total"] / (before["cost_usd"]["total"] or 1) - 1
        lines.append(
            f"The largest single step is *{after['title']}*: {change:+.0%} on the bill against "
            f"*{before['title']}*."
        )
    for before, after in steps:
        reclaimed = after["reclaim"]["gpu_hours"] - before["reclaim"]["gpu_hours"]
        if reclaimed > 0 and "idle" in after["controller"] and "idle" not in before["controller"]:
            billed = before["gpu_hours"]["billed"] - after["gpu_hours"]["billed"]
            lines.append(
                f"Idle reclamation returned {reclaimed:,.0f} GPU-hours to the fleet; the bill "
                f"fell by {billed:,.0f} GPU-hours ({billed / reclaimed:.0%} of that): a "
                "reclaimed GPU stops costing only when its whole node empties and is removed."
            )
    harmed = sum(s["harmed_non_preemptible"]["count"] for s in scenarios)
    preempted = sum(s["preemption"]["victims"] for s in scenarios)
    lines.append(
        f"{preempted} preemption(s) in all; {harmed} pod(s) of non-preemptible types harmed."
    )
    return lines


def _steps(scenarios: list[dict[str, Any]]) -> str:
    """What each scenario changed against the one before it."""
    rows = [
        "What each step adds, against the scenario before it:",
        "",
        "| step | GPU bill | allocated | busy | wait p99 (all) | GPU-hours refused at the gate |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for before, after in itertools.pairwise(scenarios):
        cost = after["cost_usd"]["total"] / (before["cost_usd"]["total"] or 1) - 1
        allocation = (after["ratios"]["allocation"] - before["ratios"]["allocation"]) * 100
        busy = (after["ratios"]["busy"] - before["ratios"]["busy"]) * 100
        wait = (
            after["queue_wait_seconds"]["all"]["p99"] - before["queue_wait_seconds"]["all"]["p99"]
        )
        rows.append(
            f"| {after['title']} | {cost * 100:+.1f}% | {allocation:+.1f} pts | {busy:+.1f} pts "
            f"| {wait:+.0f} s | {after['admission']['denied_gpu_hours']:,.1f} |"
        )
    return "\n".join(rows)


def _claims(scenarios: list[dict[str, Any]]) -> str:
    """The figures often quoted for GPU fleets, next to what this replay measured."""
    by_name = {s["name"]: s for s in scenarios}
    rows = [
        "Figures often quoted for GPU fleets, and what this replay measured on the trace:",
        "",
        "| quoted | measured here |",
        "|---|---|",
    ]
    fixed, autoscaled = by_name.get("fixed"), by_name.get("autoscaled")
    spot, reclaim = by_name.get("spot"), by_name.get("reclaim")
    if fixed:
        rows.append(
            "| a fixed cluster runs at about 40 % utilisation "
            f"| fixed, bought for the peak: {_pct(fixed['ratios']['allocation'])} of GPU-hours "
            f"allocated, {_pct(fixed['ratios']['busy'])} busy |"
        )
    if reclaim:
        rows.append(
            "| 85 % after autoscaling and reclamation "
            f"| {_pct(reclaim['ratios']['allocation'])} allocated, "
            f"{_pct(reclaim['ratios']['busy'])} busy |"
        )
    if spot and (autoscaled or fixed):
        base = autoscaled or fixed
        assert base is not None
        change = spot["cost_usd"]["total"] / base["cost_usd"]["total"] - 1
        versus_fixed = (
            f", {spot['cost_usd']['total'] / fixed['cost_usd']['total'] - 1:+.0%} against the "
            "fixed cluster"
            if fixed
            else ""
        )
        rows.append(
            "| 82 % lower cost with spot "
            f"| {change:+.0%} against the same pools without spot{versus_fixed}; only training "
            "and batch may go to spot |"
        )
    return "\n".join(rows)


def _assumptions(document: dict[str, Any], files: dict[str, str]) -> str:
    trace = document["trace"]
    settings = document["settings"]
    a = document["assumptions"]
    cal = document["calibration"]
    out: list[str] = []
    add = out.append
    add("## The trace")
    add("")
    add(
        f"`{trace['source']}`: {trace['gpu_pods']:,} pods ask for GPUs "
        f"({trace['sharing_pods']:,} of them a share of one GPU) and "
        f"{trace.get('cpu_only_pods', 0):,} for CPU only, replayed on the GPU nodes as the "
        "traced cluster ran them (left out: "
        f"{', '.join(f'{v:,} {k}' for k, v in trace['skipped'].items()) or 'none'}), "
        f"{trace['never_scheduled']:,} never scheduled by the traced cluster. At most "
        f"{trace['peak_gpus']} GPUs were held at once. The traced cluster had {trace['nodes']:,} "
        f"GPU nodes ({trace['node_gpus']:,} GPUs, most in nodes of {trace['gpus_per_node']}): the "
        "pod list is a sample of its work, so the replayed fleet is sized to the pods, not to "
        "that cluster (at its size the pods would fill about 1% of it)."
    )
    add("")
    add(
        f"The window: 99% of the pods arrive after day {trace['window_days'][0]:.0f}. Before "
        "that the trace holds only the few long-running pods that were still alive when it was "
        "taken, not the work the cluster did then, so a fixed cluster would look idle for "
        "reasons that belong to the sampling. The replay runs the whole trace and measures "
        "from the window's start (`--window all` measures everything)."
    )
    add("")
    add(
        "Trace facts used: each pod's GPU count and share, QoS class, phase, and its times "
        "(arrival = creation; run time = deletion - scheduling, or deletion - creation for "
        "pods never scheduled). A sharing pod is given a whole GPU (an upper bound on demand); "
        "its share caps its utilisation."
    )
    add("")
    add("## Assumptions (not in the trace)")
    add("")
    add(
        f"All generated from seed {a['seed']}; change them in `replay/generate.py` "
        "(`Assumptions`) and `replay/scenarios.yaml`."
    )
    add("")
    mix = a["mix"]
    add(
        "- **Workload type**: pods with 2+ GPUs, and Burstable or Guaranteed pods, are training; "
        "one-GPU LS pods are "
        + ", ".join(f"{k} {v:.0%}" for k, v in mix["ls-single"].items())
        + "; one-GPU BE pods are "
        + ", ".join(f"{k} {v:.0%}" for k, v in mix["be-single"].items())
        + ". Training pods of QoS "
        + ", ".join(a["high_priority_qos"])
        + " use the type's higher priority class."
    )
    teams = "; ".join(
        f"{kind}: " + ", ".join(f"{t} {w:.0%}" for t, w in shares.items())
        for kind, shares in document["assignment"].items()
    )
    add(f"- **Teams**: {teams}.")
    add(
        "- **Where work goes**: per scenario, `spot_types` go to spot when there is a spot pool "
        "(with the selector, toleration and checkpoint annotation the gate asks for); everything "
        "else to on-demand. Notebooks declare a one-hour idle timeout."
    )
    shapes = "; ".join(
        f"{k}: {v['inert']:.0%} inert, active {v['active_mean_seconds'] / 60:.0f} min / pause "
        f"{v['pause_mean_seconds'] / 60:.0f} min, level median {v['level_median_percent']}% "
        f"(sigma {v['level_sigma']})"
        for k, v in a["shapes"].items()
    )
    add(
        "- **Utilisation** over each pod's progress: a pod is either inert (0 % all its life) or "
        "alternates active phases at a per-pod lognormal level and pauses at 0 % (exponential "
        f"lengths). {shapes}. Pods the trace records as Failed are inert with "
        f"{a['failed_inert'] * 100:.0f} points more probability; pods running "
        f"{a['long_run_seconds'] / 3600:.0f} h or more are inert {a['long_inert_factor']:.0%} as "
        "often. GPU memory is held steady."
    )
    add(
        "- **Checkpoints**: "
        + ", ".join(
            f"{k} every {v / 60:.0f} min of progress" for k, v in a["checkpoint_seconds"].items()
        )
        + "; other types restart from zero when preempted or interrupted. A reclaimed pod's owner "
        "comes back when its profile turns busy again and continues from there (never, when it "
        "would have stayed idle to its end); reclaimed GPU-hours count that gap."
    )
    add(
        f"- **Fleet model**: nodes take {settings['provision_seconds']:.0f} s from request to "
        f"ready and are removed after {settings['scale_down_seconds']:.0f} s empty; spot nodes "
        f"are interrupted at {settings['spot_interruptions_per_node_month']} per node-month "
        "(exponential; the lower edge of the highest band, >20 %, of AWS's Spot Instance "
        "Advisor, which reports the share of capacity reclaimed in a month), with no warning "
        "used to checkpoint. Evicted and deleted pods hold their GPUs for 30 s. The scheduler "
        "packs GPUs (fullest node that fits), never preempts by itself, and enforces team "
        "quotas; a submission refused by the gate is not retried. Time 0 is "
        "2026-01-01T00:00:00Z (budgets reset on calendar months)."
    )
    add("")
    add("### Calibration of the utilisation generator")
    add("")
    add("| figure | published | generated fleet | source |")
    add("|---|---:|---:|---|")
    for key, target in cal["targets"].items():
        value = target["target"]
        shown = (
            f"{value[0]:.0%}-{value[1]:.0%}"
            if isinstance(value, list)
            else (f"{value:.1%}" if key == "pods_at_zero" else f"{value}%")
        )
        got = cal["achieved"][key]
        got_shown = (
            f"{got:.1%}"
            if key in ("pods_at_zero", "idle_share_of_reserved_gpu_time")
            else f"{got}%"
        )
        add(f"| {CALIBRATION_LABELS.get(key, key)} | {shown} | {got_shown} | {target['source']} |")
    add("")
    add(f"![Calibration]({files['calibration']})")
    add("")
    add("Sources:")
    add("")
    for citation in cal["citations"]:
        add(f"- {citation}")
    add("")
    add("## Reproduce")
    add("")
    add("```sh")
    add("fleetplane replay --out DIR          # the default scenarios, this report")
    add("fleetplane replay --scenario all --out DIR   # with the optional scenarios")
    add("fleetplane replay --scenario fixed --scenario governed --out DIR")
    add(
        "python bench/replay_default_trace.py                          # the default trace, figures table"
    )
    add("```")
    add("")
    t = document["throughput"]
    add(
        f"This replay: {t['wall_seconds']:.1f} s wall on {t['cpus']} CPUs with {t['workers']} "
        f"worker(s), {t.get('cpu_seconds', 0):,.0f} CPU-seconds (replay and OPA), "
        f"{t['events']:,} events ({t['events_per_second']:,.0f}/s), "
        f"{t['periods']:,} controller periods ({t['periods_per_second']:,.0f}/s)."
    )
    return "\n".join(out)
