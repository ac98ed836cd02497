"""The `fleetplane` command: one parser, each subcommand handed to its room's `cli.py`.

Every room's `cli.py` has `add_parser(subparsers)`, which adds its command(s) and sets `run`,
and `run(args) -> int`, which imports what the command needs only when it runs: building this
parser loads no Kubernetes client, numpy, matplotlib or Pulumi.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from controller import cli as controller_cli
from controller.health import cli as health_cli
from fleet import cli as fleet_cli
from fleetplane import checkpoint_cli
from images import cli as images_cli
from localfleet import cli as localfleet_cli
from observability import cli as observability_cli
from policyreview import cli as policyreview_cli
from replay import cli as replay_cli

EXIT_CODES = """\
exit status, the same for every command:
  0  done
  1  a finding: a decision changed, a check failed, a workload was harmed, an action failed
  2  bad input (configuration, arguments, trace) or a part that is down or missing"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fleetplane",
        description="GPU and TPU fleets as code: a local fleet to try it on, the stack's "
        "rendered policy data, policy review, the trace replay, and the in-cluster controller.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    localfleet_cli.add_parser(commands)
    fleet_cli.add_parser(commands)
    policyreview_cli.add_parser(commands)
    replay_cli.add_parser(commands)
    observability_cli.add_parser(commands)
    controller_cli.add_parser(commands)
    images_cli.add_parser(commands)
    health_cli.add_parser(commands)
    checkpoint_cli.add_parser(commands)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fleetplane")
    except PackageNotFoundError:
        return "(not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    # A command that hands its arguments on to another (the validator pod's `controller upgrade
    # validate`, to `health check`) takes what it does not know itself; no other command does.
    args, rest = parser.parse_known_args(argv)
    if rest and not getattr(args, "passes_on_arguments", False):
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    args.rest = rest
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
