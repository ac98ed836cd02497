"""`fleetplane report`: the monthly chargeback per team, from Prometheus.

    fleetplane report [--month YYYY-MM] [--prometheus-url URL] [--stack NAME | --config-file F]
                      [--out DIR]

Writes report-<month>.csv, .md and .html (charts inline) into --out and prints the Markdown.
The month defaults to the current one (UTC), Prometheus to the stack's
`controller.prometheus_url`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT_CODES = "exit status: 0 written; 2 bad input (month, configuration) or Prometheus unreachable."


def add_parser(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "report",
        help="the monthly GPU chargeback per team (CSV, Markdown, HTML) from Prometheus",
        description="The monthly GPU chargeback per team from Prometheus: GPU-hours and cost by "
        "team x workload type x model x capacity type, utilisation, idle and reclaimed "
        f"GPU-hours, queue wait, inference availability, energy and emissions. {EXIT_CODES}",
    )
    parser.add_argument("--month", help="YYYY-MM (default: the current month, UTC)")
    parser.add_argument(
        "--prometheus-url", help="Prometheus base URL (default: config controller.prometheus_url)"
    )
    parser.add_argument("--stack", default="local", help="stack whose configuration to use")
    parser.add_argument("--config-file", type=Path, help="a Pulumi.<stack>.yaml file instead")
    parser.add_argument("--cluster", help="cluster whose region sets the carbon intensity")
    parser.add_argument("--out", type=Path, default=Path("reports"), help="output directory")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from fleet.config import ConfigError, load_stack_config
    from fleet.project import stack_file
    from observability.report import Month

    try:
        month = Month.parse(args.month) if args.month else None
    except ValueError:
        print(f"--month {args.month!r}: expected YYYY-MM", file=sys.stderr)
        return 2
    path = args.config_file or stack_file(args.stack)
    try:
        config = load_stack_config(path)
    except (ConfigError, OSError) as error:
        print(f"{path}: {error}", file=sys.stderr)
        return 2
    url = args.prometheus_url or config.controller.prometheus_url
    return write_month_report(url, config, month, args.out, cluster=args.cluster)


def write_month_report(
    prometheus_url: str, config: Any, month: Any, out: Path, *, cluster: str | None = None
) -> int:
    """Build, write and print one month's report (the current month when `month` is None);
    the exit status. The local fleet calls this after its main job."""
    import time

    from observability.report import Month, ReportError, build_report, to_markdown, write_report

    try:
        report = build_report(
            prometheus_url, config, month or Month.of(time.time()), cluster=cluster
        )
    except ReportError as error:
        print(f"report: {error}", file=sys.stderr)
        return 2
    written = write_report(report, out)
    sys.stdout.write(to_markdown(report))
    for kind, path in written.items():
        print(f"{kind}: {path}", file=sys.stderr)
    return 0
