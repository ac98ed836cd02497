"""`fleetplane replay`: replay a GPU trace through fleet scenarios and write a report.

Exit status: 0 when the replay ran and no pod of a non-preemptible workload type was harmed,
1 when one was, 2 for a usage, trace, scenario or OPA problem.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replay.settings import Settings
from replay.trace import DEFAULT_NODE_FILE, DEFAULT_POD_FILE, DEFAULT_TRACE_DIR

if TYPE_CHECKING:
    from replay.runner import Options

DESCRIPTION = (
    "Replay a GPU trace (Alibaba 2023 columns) through fleet scenarios: the real admission "
    "policies and the controller's decision code every period, a modelled scheduler, "
    "autoscaler and spot market around them. Prints a figures table; --out writes report.md, "
    "PNG plots and figures.json."
)
EXIT_CODES = (
    "exit status: 0 the replay ran and no pod of a non-preemptible workload type was harmed; "
    "1 one was; 2 bad input (trace, scenario, configuration) or a part that is down (OPA)."
)
_DEFAULTS = Settings()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trace-dir",
        type=Path,
        default=DEFAULT_TRACE_DIR,
        help=f"directory with the pod and node lists (default {DEFAULT_TRACE_DIR})",
    )
    parser.add_argument(
        "--pods", default=DEFAULT_POD_FILE, help=f"pod list in it (default {DEFAULT_POD_FILE})"
    )
    parser.add_argument(
        "--nodes", default=DEFAULT_NODE_FILE, help=f"node list in it (default {DEFAULT_NODE_FILE})"
    )
    parser.add_argument(
        "--scenarios",
        type=Path,
        default=None,
        help="scenario file (default: the one shipped with the replay)",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        default=[],
        metavar="NAME",
        help="run only this scenario (repeatable; default all)",
    )
    parser.add_argument("--out", type=Path, help="write report.md, PNGs and figures.json here")
    parser.add_argument(
        "--window",
        default="auto",
        help="measured span: auto (from the day 1%% of the pods had arrived), all, or "
        "START:END in days (default auto)",
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="seed of the generated assumptions and spot draws"
    )
    parser.add_argument(
        "--provision-seconds",
        type=float,
        default=_DEFAULTS.provision_seconds,
        help=f"node request to ready (default {_DEFAULTS.provision_seconds:.0f})",
    )
    parser.add_argument(
        "--scale-down-seconds",
        type=float,
        default=_DEFAULTS.scale_down_seconds,
        help=f"empty node removed after (default {_DEFAULTS.scale_down_seconds:.0f})",
    )
    parser.add_argument(
        "--spot-interruptions",
        type=float,
        default=_DEFAULTS.spot_interruptions_per_node_month,
        metavar="PER_NODE_MONTH",
        help="spot interruption rate per node per 30 days "
        f"(default {_DEFAULTS.spot_interruptions_per_node_month})",
    )
    parser.add_argument(
        "--opa-url",
        help="use this OPA (with the project's policies loaded) and run scenarios one after "
        "another; default: start one OPA per scenario from tools/bin",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=0,
        help="worker processes (default: one per scenario)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--mode",
        choices=("replay", "pack"),
        default="replay",
        help="replay: the trace in time through the scenarios (default); pack: the packing "
        "experiment of Weng et al. (ATC 2023): pods arrive without leaving into the whole node "
        "list until it is full, policies side by side",
    )
    parser.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="NAME",
        help="pack mode: placement policy (repeatable; default all: random, best-fit, "
        "dot-product, gpu-packing, fgd, volcano, and volcano:<variant>)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="pack mode: draws per policy (shuffle and workload sampling; default 3)",
    )


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add `replay` to a command line's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "replay",
        help="replay a GPU trace through fleet scenarios",
        description=DESCRIPTION + " " + EXIT_CODES,
    )
    add_arguments(parser)
    parser.set_defaults(run=run)
    return parser


def options_from(args: argparse.Namespace) -> Options:
    from replay.runner import Options
    from replay.scenarios import DEFAULT_SCENARIOS

    settings = replace(
        _DEFAULTS,
        provision_seconds=args.provision_seconds,
        scale_down_seconds=args.scale_down_seconds,
        spot_interruptions_per_node_month=args.spot_interruptions,
    )
    options = Options(
        trace_dir=args.trace_dir,
        pod_file=args.pods,
        node_file=args.nodes,
        scenarios=args.scenarios or DEFAULT_SCENARIOS,
        only=tuple(args.scenario),
        settings=settings,
        window=args.window,
        opa_url=args.opa_url,
        jobs=args.jobs,
    )
    if args.seed is not None:
        options = replace(
            options,
            settings=replace(settings, seed=args.seed),
            assumptions=replace(options.assumptions, seed=args.seed),
        )
    return options


def run_errors() -> tuple[type[Exception], ...]:
    """What a replay raises for bad input or a part that is down: reported in one line, exit 2."""
    from fleet.config import ConfigError
    from localfleet.servers import ServerError
    from replay.opa import PolicyError
    from replay.scenarios import ScenarioError
    from replay.trace import TraceError

    return (TraceError, ScenarioError, ConfigError, PolicyError, ServerError, ValueError)


def run(args: argparse.Namespace) -> int:
    """Run the replay the parsed arguments describe (the `replay` subcommand's entry point)."""
    from replay import report, runner

    RUN_ERRORS = run_errors()
    if args.mode == "pack":
        try:
            return run_pack(args)
        except RUN_ERRORS as error:
            print(f"replay: {error}", file=sys.stderr)
            return 2
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    try:
        document = runner.run(options_from(args), progress=progress)
    except RUN_ERRORS as error:
        print(f"replay: {error}", file=sys.stderr)
        return 2
    print(table(document))
    if args.out:
        paths = report.write(args.out, document)
        print(f"\nreport: {paths['report']}\nfigures: {paths['json']}")
    harmed = sum(s["harmed_non_preemptible"]["count"] for s in document["scenarios"])
    if harmed:
        print(f"replay: {harmed} pod(s) of non-preemptible types were harmed", file=sys.stderr)
        return 1
    return 0


def run_pack(args: argparse.Namespace) -> int:
    """`--mode pack`: the packing experiment; prints its table, writes its report with --out."""
    from replay.pack import experiment
    from replay.pack import report as pack_report
    from replay.trace import read_nodes, read_pod_requests

    known = experiment.known_policies()
    policies = args.policy or known
    unknown = [p for p in policies if p not in known]
    if unknown:
        raise ValueError(f"unknown policy {', '.join(unknown)} (known: {', '.join(known)})")
    pod_path = args.trace_dir / args.pods
    pods = read_pod_requests(pod_path)
    nodes = read_nodes(args.trace_dir / args.nodes)
    base = args.seed if args.seed is not None else 42
    seeds = [base + i for i in range(max(1, args.repeats))]
    if not args.quiet:
        print(
            f"packing {len(pods):,} pods of {pod_path.name} into {len(nodes):,} nodes: "
            f"{', '.join(policies)} x {len(seeds)} draw(s)",
            file=sys.stderr,
            flush=True,
        )
    result = experiment.run(pods, nodes, policies, seeds, trace=str(pod_path), jobs=args.jobs)
    document = pack_report.summary(result)
    print(pack_report.table(document))
    for policy, figures in document["policies"].items():
        print(
            f"  {policy}: {figures['seconds_per_draw']:.1f} s wall, "
            f"{figures['cpu_seconds_per_draw']:.1f} CPU-s per draw",
            file=sys.stderr,
        )
    if args.out:
        paths = pack_report.write(args.out, document)
        print(f"\nreport: {paths['report']}\nfigures: {paths['json']}")
    return 0


def table(document: dict[str, Any]) -> str:
    """The figures table printed on stdout."""
    rows = [
        (
            "scenario",
            "GPU bill",
            "vs 1",
            "alloc",
            "busy",
            "$/busy GPU-h",
            "wait p50/p95/p99",
            "reclaimed GPU-h",
            "preempted (lost GPU-h)",
            "spot hits (lost GPU-h)",
            "denied",
            "harmed",
        )
    ]
    scenarios = document["scenarios"]
    base = scenarios[0]["cost_usd"]["total"] or 1.0
    for i, s in enumerate(scenarios):
        w = s["queue_wait_seconds"]["all"]
        per_busy = s["cost_usd"]["per_busy_gpu_hour"]
        rows.append(
            (
                f"{i + 1}. {s['name']}",
                f"${s['cost_usd']['total']:,.0f}",
                "—" if i == 0 else f"{(s['cost_usd']['total'] / base - 1) * 100:+.0f}%",
                f"{s['ratios']['allocation'] * 100:.1f}%",
                f"{s['ratios']['busy'] * 100:.1f}%",
                "—" if per_busy is None else f"${per_busy:.2f}",
                f"{w['p50']:.0f}/{w['p95']:.0f}/{w['p99']:.0f} s",
                f"{s['reclaim']['gpu_hours']:,.0f}",
                f"{s['preemption']['victims']} ({s['preemption']['work_lost_gpu_hours']:,.1f})",
                f"{s['spot']['pods_interrupted']} ({s['spot']['work_lost_gpu_hours']:,.1f})",
                str(s["admission"]["denied"]),
                str(s["harmed_non_preemptible"]["count"]),
            )
        )
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = [
        "  ".join(
            cell.ljust(widths[c]) if c == 0 else cell.rjust(widths[c]) for c, cell in enumerate(row)
        )
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    t = document["throughput"]
    trace = document["trace"]
    lines.append("")
    lines.append(
        f"window: days {trace['window_days'][0]:.0f}-{trace['window_days'][1]:.0f} of "
        f"{trace['days']:.0f}; {trace['gpu_pods']:,} GPU pods; fleet sized to the trace's peak "
        f"of {trace['peak_gpus']} GPUs"
    )
    lines.append(
        f"replay: {t['wall_seconds']:.1f} s wall, {t['events']:,} events "
        f"({t['events_per_second']:,.0f}/s), {t['periods']:,} controller periods "
        f"({t['periods_per_second']:,.0f}/s), {t['workers']} worker(s) on {t['cpus']} CPUs, "
        f"{t['cpu_seconds']:,.0f} CPU-seconds (replay and OPA)"
    )
    for s in scenarios:
        st = s["throughput"]
        cpu = st.get("cpu_seconds")
        used = (
            f", {cpu['total']:.1f} CPU-s (replay {cpu['replay']:.1f}, OPA {cpu['opa']:.1f})"
            if isinstance(cpu, dict)
            else ""
        )
        lines.append(
            f"  {s['name']}: {st['wall_seconds']:.1f} s, {st['events_per_second']:,.0f} events/s, "
            f"{st['periods_per_second']:,.0f} periods/s, controller {st['controller_seconds']:.1f} s, "
            f"OPA wait {st['opa']['seconds']:.1f} s in {st['opa']['queries']} queries "
            f"({st['opa']['admission_reviews']} reviews, "
            f"{st['opa'].get('reviews_answered_ahead', 0)} of them asked ahead, "
            f"{st['opa']['reclaim_decisions']} reclaim, "
            f"{st['opa']['preempt_decisions']} preempt decisions){used}"
        )
    return "\n".join(lines)
