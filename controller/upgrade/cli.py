"""`fleetplane controller upgrade {status,run,clear,validate}`: the rolling GPU driver upgrade.

    fleetplane controller upgrade status [--json] [--all-nodes]
    fleetplane controller upgrade run [--dry-run]
    fleetplane controller upgrade clear NODE [--dry-run]
    fleetplane controller upgrade validate [health check options]   (what the validator pod runs)

`add_parser(subparsers)` adds the `upgrade` command to the controller's command line; `run(args)`
runs it and returns the exit status: 0 done (status printed, pass completed or skipped because
another upgrade pass holds the Lease, failure cleared), 1 an action, observation or clear
failed, 2 a configuration or usage problem.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from controller.startup import add_dry_run, add_publish_options, command_group

DESCRIPTION = (
    "Roll each pool's GPU driver (pools.<pool>.driver_version) node by node: cordon, wait for "
    "jobs, evict, restart the driver pod, validate the node with the NVML health check, "
    "uncordon. Never more than max_unavailable nodes out at once, only inside a maintenance "
    "window, each node on OPA's allow; a failed validation halts the pool."
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add `upgrade` (with `status`, `run`, `clear`) to a command line's subparsers."""
    parser, actions, common = command_group(
        subparsers,
        "upgrade",
        help="Roll GPU driver upgrades node by node, with validation (status, run, clear).",
        description=DESCRIPTION,
        lease_name_help="Lease name prefix; the upgrade takes <name>-upgrade (default: config)",
    )
    status = actions.add_parser(
        "status",
        parents=[common],
        help="per-pool progress: nodes per state, and what blocks the rollout",
        description="Per-pool progress (nodes per state) and what blocks the rollout: the "
        "maintenance window, the limit, a failed node, a PodDisruptionBudget. Read-only.",
    )
    status.add_argument("--json", action="store_true", help="print JSON instead of text")
    status.add_argument(
        "--all-nodes", action="store_true", help="list every node, also those at the target"
    )
    run_parser = actions.add_parser(
        "run",
        parents=[common],
        help="one pass: move every node of the rollout at most one step",
        description="One pass: observe, plan, act. Every step is idempotent; a killed run is "
        "resumed by the next one.",
    )
    add_publish_options(run_parser)
    add_dry_run(
        run_parser, "print the next steps (and OPA's answers) without acting; no Lease either"
    )
    clear = actions.add_parser(
        "clear",
        parents=[common],
        help="clear a failed node: validate it again (or upgrade it again)",
        description="Clear a failed node (an operator's decision, logged and recorded as an "
        "Event). It stays cordoned and becomes done only after a validator passes again.",
    )
    clear.add_argument("node", metavar="NODE", help="the failed node")
    add_dry_run(clear, "show, change nothing")
    validate = actions.add_parser(
        "validate",
        help="what the validator pod runs: the node's health check, verdict to the termination log",
        usage="fleetplane controller upgrade validate [health check options]",
        description="Run `fleetplane health check` with the given options (see `fleetplane health check --help`), copy its JSON verdict "
        "to stdout and its compact form to the pod's termination-message file; exit with the "
        "check's status (0 healthy, 1 unhealthy, 2 cannot check).",
    )
    for action in (status, run_parser, clear):
        action.set_defaults(run=run)
    validate.set_defaults(run=_validate, passes_on_arguments=True)
    return parser


def _validate(args: argparse.Namespace) -> int:
    from controller.upgrade.validator import run_validation

    return run_validation(getattr(args, "rest", []))


def run(args: argparse.Namespace) -> int:
    import orjson

    from controller.errors import ControllerError
    from controller.startup import begin, print_summary, publish
    from controller.summary import PUSH_JOB
    from controller.upgrade.report import format_acted, format_plan
    from controller.upgrade.rollout import clear_failure, run_upgrade_pass, upgrade_status
    from controller.upgrade.settings import upgrade_settings

    started = begin(
        args,
        section=upgrade_settings,
        asks_opa=args.upgrade_command not in ("status", "clear"),
        dry_run=getattr(args, "dry_run", None),
        pushgateway_url=getattr(args, "pushgateway_url", None),
    )
    if isinstance(started, int):
        return started
    kube, upgrade, log = started.kube, started.section, started.log
    try:
        if args.upgrade_command == "status":
            plan = upgrade_status(kube, upgrade, now=args.now, log=log)
            if args.json:
                document = {"now": plan.now, "pools": [r.as_dict() for r in plan.pools.values()]}
                sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode())
                sys.stdout.write("\n")
            else:
                print(format_plan(plan, all_nodes=args.all_nodes))
            return 0
        if args.upgrade_command == "clear":
            print(
                clear_failure(
                    kube, upgrade, args.node, now=args.now, dry_run=bool(args.dry_run), log=log
                )
            )
            return 0
        result = run_upgrade_pass(
            kube=kube,
            fleet=started.fleet,
            settings=started.settings,
            upgrade=upgrade,
            now=args.now,
            log=log,
        )
        if result.skipped:
            print(f"skipped: {result.skipped}")
        if result.plan is not None:
            acted = format_acted(result.acted)
            if acted:
                print(acted)
            print(format_plan(result.plan))
        print_summary(result.summary)
        publish(result.summary, args, started.settings, log, job=f"{PUSH_JOB}-upgrade")
        return 0 if result.ok else 1
    except ControllerError as error:
        log.error(f"upgrade.{args.upgrade_command}.failed", error=str(error))
        print(f"upgrade {args.upgrade_command}: {error}", file=sys.stderr)
        return 1
    finally:
        kube.close()
