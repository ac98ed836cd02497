"""`fleetplane policy diff|test`: review a policy change before it merges.

fleetplane policy diff --base origin/main     which admission decisions the change flips
fleetplane policy test                        opa fmt, opa check --strict, opa test + coverage
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

DIFF_EXIT = (
    "exit status: 0 the report was produced (1 with --fail-on-change when a decision changed); "
    "2 it could not run (bad ref, no opa, unreadable corpus)."
)
TEST_EXIT = "exit status: 0 every check passed; 1 a check failed; 2 no opa or no policies."


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add `policy` (with `diff` and `test`) to a command line's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "policy",
        help="review policy changes: the decision diff, and the policy checks",
        description="Review a change to the Rego policies before it merges.",
    )
    actions = parser.add_subparsers(dest="policy_command", required=True, metavar="ACTION")
    diff = actions.add_parser(
        "diff",
        help="every admission decision a policy change flips, as Markdown",
        description="Evaluate the policies of a base git ref and of the working tree over the "
        "same AdmissionReviews (the shipped corpus plus requests generated from the trace) and "
        f"print every decision that changed. {DIFF_EXIT}",
    )
    diff.add_argument("--base", required=True, help="git ref to compare with (e.g. origin/main)")
    diff.add_argument(
        "--corpus", action="append", help="directory of AdmissionReview JSON (repeatable)"
    )
    diff.add_argument("--data", help="data.fleetplane.config JSON (default: the corpus's)")
    diff.add_argument("--spend", help="data.fleetplane.spend JSON (default: none)")
    diff.add_argument(
        "--approvals",
        help="data.fleetplane.approvals JSON (default: the corpus's, with --data none)",
    )
    diff.add_argument(
        "--workloads",
        help="data.fleetplane.workloads JSON (default: the corpus's, with --data none)",
    )
    diff.add_argument("--trace", help="trace pod list CSV, or `none` (default: the shipped one)")
    diff.add_argument("--trace-limit", type=int, help="use only the first N trace pods")
    diff.add_argument("--seed", type=int, default=2023, help="seed of the trace mapping")
    diff.add_argument("--repo", help="git work tree (default: the project you stand in)")
    diff.add_argument("--opa", help="opa binary (default: tools/bin/opa, else the PATH)")
    diff.add_argument("--output", help="also write the report to this file")
    diff.add_argument(
        "--fail-on-change", action="store_true", help="exit 1 when a decision changed"
    )
    diff.set_defaults(run=run_diff)
    test = actions.add_parser(
        "test",
        help="opa fmt, opa check --strict, opa test with coverage per file",
        description="The checks a policy change must pass: `opa fmt` changes nothing, "
        "`opa check --strict` passes, `opa test` passes with at least --min-coverage percent "
        f"per policy file. {TEST_EXIT}",
    )
    test.add_argument(
        "--min-coverage",
        type=float,
        default=90.0,
        help="minimum coverage per policy file, percent (default: 90)",
    )
    test.add_argument("--policies", type=Path, help="policy directory (default: the project's)")
    test.add_argument("--opa", help="opa binary (default: tools/bin/opa, else the PATH)")
    test.set_defaults(run=run_test)
    return parser


def run_diff(args: argparse.Namespace) -> int:
    from policyreview.diff import (
        DEFAULT_APPROVALS,
        DEFAULT_DATA,
        DEFAULT_TRACE,
        DEFAULT_WORKLOADS,
        PolicyDiffError,
        run,
    )

    if args.approvals is None and args.data is None:
        args.approvals = str(DEFAULT_APPROVALS)
    if getattr(args, "workloads", None) is None and args.data is None:
        args.workloads = str(DEFAULT_WORKLOADS)
    args.data = args.data or str(DEFAULT_DATA)
    args.trace = args.trace or str(DEFAULT_TRACE)
    try:
        text, changes = run(args)
    except PolicyDiffError as error:
        print(f"policy diff: {error}", file=sys.stderr)
        return 2
    print(text)
    if args.output:
        Path(args.output).write_text(text)
    return 1 if args.fail_on_change and changes else 0


def run_test(args: argparse.Namespace) -> int:
    from fleet.project import policies_dir
    from localfleet.binaries import MissingToolError, find_binary
    from policyreview.checks import check_policies

    try:
        opa = find_binary("opa", args.opa)
    except MissingToolError as error:
        print(f"policy test: {error}", file=sys.stderr)
        return 2
    policies = (args.policies or policies_dir()).resolve()
    if not policies.is_dir():
        print(f"policy test: no policy directory at {policies}", file=sys.stderr)
        return 2
    failures = check_policies(opa, policies, min_coverage=args.min_coverage, say=print)
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    if not failures:
        print("policy checks passed: opa fmt, opa check --strict, opa test with coverage")
    return 1 if failures else 0
