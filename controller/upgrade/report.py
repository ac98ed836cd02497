"""Printing a plan's pool reports for people (`upgrade status`, the end of `upgrade run`)."""

from __future__ import annotations

from controller.observe.model import format_time
from controller.upgrade.act import ActReport
from controller.upgrade.plan import CURRENT, Plan, PoolReport
from controller.upgrade.states import UPGRADE_DONE


def format_pool(report: PoolReport, *, all_nodes: bool = False) -> str:
    lines = [
        f"pool {report.name}: target driver {report.target}, {report.nodes} node(s), "
        + ("complete" if report.complete else "HALTED" if report.halted else "in progress"),
        f"  unavailable {report.unavailable}/{report.max_unavailable} (max_unavailable), "
        f"in the rollout {report.in_progress}/{report.max_parallel} (max_parallel), "
        + (
            "maintenance window open"
            if report.window_open
            else "maintenance window closed"
            + (f" (next opens {format_time(report.next_window)})" if report.next_window else "")
        ),
        "  states: " + ", ".join(f"{s} {n}" for s, n in sorted(report.states.items())),
    ]
    if report.failed:
        lines.append("  failed:")
        lines += [f"    {node}: {reason}" for node, reason in sorted(report.failed.items())]
    if report.blocks:
        lines.append("  blocked by:")
        lines += [f"    - {block}" for block in report.blocks]
    shown = [
        line
        for line in report.lines
        if all_nodes or line.state not in (CURRENT, UPGRADE_DONE) or line.note
    ]
    if shown:
        lines.append("  nodes:")
        width = max(len(line.name) for line in shown)
        state_width = max(len(line.state) for line in shown)
        driver_width = max(len(line.driver or "?") for line in shown)
        for line in shown:
            since = f"since {format_time(line.since)}" if line.since else ""
            lines.append(
                f"    {line.name:<{width}}  {line.state:<{state_width}}  "
                f"driver {line.driver or '?':<{driver_width}}  {since:<26}  {line.note}".rstrip()
            )
    return "\n".join(lines)


def format_plan(plan: Plan, *, all_nodes: bool = False) -> str:
    if not plan.pools:
        return "no pool has a driver version to roll (pools.<pool>.driver_version)"
    return "\n\n".join(format_pool(r, all_nodes=all_nodes) for r in plan.pools.values())


def format_acted(acted: ActReport) -> str:
    lines = []
    for node, state in sorted(acted.moved.items()):
        lines.append(f"moved {node} -> {state}")
    for node, reasons in sorted(acted.denied.items()):
        lines.append(f"OPA denied starting {node}: {reasons}")
    for refusal in acted.refused_evictions:
        lines.append(f"eviction refused by a PodDisruptionBudget: {refusal}")
    return "\n".join(lines)
