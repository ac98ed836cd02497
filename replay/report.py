"""The replay's report: `report.md` with PNG plots (`report_plots`), and `figures.json` with
every figure."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from replay import report_plots
from replay.results import CPU_ONLY
from replay.workloads import WORKLOAD_TYPES


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
    report_plots.cost(paths["cost"], scenarios)
    report_plots.ratios(paths["ratios"], scenarios)
    report_plots.timeline(paths["timeline"], scenarios)
    report_plots.daily(paths["daily"], scenarios)
    report_plots.waits(paths["waits"], scenarios)
    report_plots.disruptions(paths["disruptions"], scenarios)
    report_plots.calibration(paths["calibration"], document["calibration"])
    paths["report"].write_text(markdown(document, {k: p.name for k, p in paths.items()}))
    return paths


# --------------------------------------------------------------------------- plots


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
