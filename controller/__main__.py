"""Command line: `python -m controller {reconcile,idle,spend,preempt,upgrade,replay} [options]`.

One pass per run (a CronJob runs it every period). Exit status: 0 when the pass completed
without error (or was skipped because another pass holds the Lease), 1 when any action or
observation failed, 2 for a configuration or usage problem.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from controller.cli import common_options, connect, load
from controller.errors import TemporaryError
from controller.log import Log, configure
from controller.reconcile import CONCERNS, run_pass
from controller.upgrade import cli as upgrade_cli

DESCRIPTIONS = {
    "reconcile": "One full pass: idle reclamation, spend accounting, then priority preemption.",
    "idle": "Warn idle accelerator workloads, clear warnings of busy ones, reclaim after the grace period.",
    "spend": "Compute month-to-date accelerator spend per team, keep the accumulator, publish it to OPA.",
    "preempt": "Evict the least-work-lost victims for workloads kept waiting by lower-priority work.",
}


def _options() -> argparse.ArgumentParser:
    common = common_options(
        lease_name_help="name of the Lease (default: config controller.lease_name)"
    )
    common.add_argument(
        "--prometheus-url", help="Prometheus base URL (default: config controller.prometheus_url)"
    )
    common.add_argument(
        "--dry-run",
        action="store_true",
        default=None,
        help="decide and print every action it would take; change nothing (no Lease either)",
    )
    common.add_argument(
        "--metrics-file", type=Path, help="write the pass summary here (Prometheus text format)"
    )
    common.add_argument("--pushgateway", help="also push the summary to this Pushgateway URL")
    common.add_argument(
        "--scrape-interval",
        type=float,
        dest="scrape_interval_seconds",
        help="DCGM scrape interval in seconds, for the samples a window should hold (default 15)",
    )
    common.add_argument(
        "--eviction-grace-seconds",
        type=int,
        help="grace period for preempted pods to checkpoint (default: the pod's own)",
    )
    common.add_argument(
        "--act-concurrency",
        type=int,
        help="independent actions carried out at once (default 8; 1 for one at a time)",
    )
    parser = argparse.ArgumentParser(
        prog="python -m controller",
        description="The fleetplane runtime controller: one idempotent pass per run.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in ("reconcile", *CONCERNS):
        sub.add_parser(
            name, parents=[common], help=DESCRIPTIONS[name], description=DESCRIPTIONS[name]
        )
    # Driver upgrades and the trace replay have options of their own. The replay needs numpy
    # and matplotlib, which a controller pass should not pay for: its parser is built on demand.
    upgrade_cli.add_parser(sub)
    sub.add_parser("replay", help="replay a GPU trace through fleet scenarios (`replay --help`)")
    return parser


def _replay(argv: list[str]) -> int:
    from controller.replay import cli as replay_cli

    parser = argparse.ArgumentParser(prog="python -m controller")
    replay_cli.add_parser(parser.add_subparsers(dest="command", required=True))
    return replay_cli.run(parser.parse_args(argv))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["replay"]:
        return _replay(argv)
    args = _options().parse_args(argv)
    if args.command == "upgrade":
        return upgrade_cli.run(args)
    configure(args.log_level)
    log = Log()
    loaded = load(
        args,
        prometheus_url=args.prometheus_url,
        dry_run=args.dry_run,
        scrape_interval_seconds=args.scrape_interval_seconds,
        eviction_grace_seconds=args.eviction_grace_seconds,
        act_concurrency=args.act_concurrency,
    )
    if isinstance(loaded, int):
        return loaded
    fleet, settings = loaded
    kube = connect(args, settings, log)
    if isinstance(kube, int):
        return kube
    concerns = CONCERNS if args.command == "reconcile" else (args.command,)
    try:
        summary = run_pass(
            kube=kube, fleet=fleet, settings=settings, concerns=concerns, now=args.now, log=log
        )
    finally:
        kube.close()
    sys.stdout.write("SUMMARY " + orjson.dumps(summary.as_dict()).decode() + "\n")
    if args.metrics_file:
        summary.write_textfile(args.metrics_file)
    if args.pushgateway:
        try:
            summary.push(args.pushgateway)
        except TemporaryError as error:
            log.error("summary.push.failed", error=str(error))
            return 1
    return 1 if summary.errors else 0


if __name__ == "__main__":
    sys.exit(main())
