"""The replay report's plots: one PNG per figure of `figures.json` (matplotlib, no display)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

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


def _labels(scenarios: list[dict[str, Any]]) -> list[str]:
    return [f"{i + 1}. {s['name']}" for i, s in enumerate(scenarios)]


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def cost(path: Path, scenarios: list[dict[str, Any]]) -> None:
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


def ratios(path: Path, scenarios: list[dict[str, Any]]) -> None:
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


def timeline(path: Path, scenarios: list[dict[str, Any]]) -> None:
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


def daily(path: Path, scenarios: list[dict[str, Any]]) -> None:
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


def waits(path: Path, scenarios: list[dict[str, Any]]) -> None:
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


def disruptions(path: Path, scenarios: list[dict[str, Any]]) -> None:
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


def calibration(path: Path, calibration: dict[str, Any]) -> None:
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
