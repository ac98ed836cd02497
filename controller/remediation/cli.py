"""`fleetplane controller remediation run|status`: run-time GPU health remediation.

    fleetplane controller remediation run [--dry-run]   one pass (the CronJob runs it)
    fleetplane controller remediation status [--json]   per pool: nodes per state, what waits, findings

(Not `fleetplane health check`: that is the NVML check the validator pod runs on a node,
controller/health.) Its log events, metrics and Lease keep the name `health`.

A concern of its own, beside `upgrade`, rather than part of `reconcile`: it has its own Lease
and its own clock (remediation timers), and a slow Prometheus or a long drain must not hold up
idle reclamation and spend. Exit status: 0 done (or skipped: another health pass holds the
Lease), 1 an action or observation failed, 2 configuration or usage.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from controller.startup import add_dry_run, add_publish_options, command_group

DESCRIPTION = (
    "Find hot, faulty and stuck GPUs in the DCGM series and remediate them node by node: "
    "quarantine (cordon, taint, condition), drain checkpoint- and gang-aware, request a GPU "
    "reset or reboot through the node's remediation-request annotation, validate with the NVML "
    "health check, return to service or hand to a person for replacement. Every step is asked "
    "of OPA (fleetplane/decisions/health); never more than health.max_unavailable of a pool at "
    "once. (Work past its maximum runtime, orphans and stragglers are the reconcile pass's "
    "lifetime concern.)"
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser, actions, common = command_group(
        subparsers,
        "remediation",
        help="Run-time GPU remediation: quarantine, drain, reset/reboot, validate (run, status).",
        description=DESCRIPTION,
        lease_name_help="Lease name prefix; health passes take <name>-health (default: config)",
    )
    common.add_argument(
        "--prometheus-url", help="Prometheus base URL (default: config controller.prometheus_url)"
    )
    run_parser = actions.add_parser(
        "run",
        parents=[common],
        help="one pass: classify every GPU, move every node at most one step",
        description="One pass: observe, classify, plan, act. Every step is idempotent; a killed "
        "run is resumed from the node's state by the next one.",
    )
    add_publish_options(run_parser)
    add_dry_run(run_parser, "print the steps (and OPA's answers); write nothing, no Lease")
    status = actions.add_parser(
        "status",
        parents=[common],
        help="per pool: nodes per state, faults waiting for the throttle, findings",
        description="What a pass would do now, read-only.",
    )
    status.add_argument("--json", action="store_true", help="print JSON")
    run_parser.set_defaults(run=run)
    status.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    import orjson

    from controller.errors import ControllerError
    from controller.observe.metrics import Prometheus
    from controller.remediation.observe import take_health_snapshot
    from controller.remediation.plan import plan_pass
    from controller.remediation.run import run_health_pass, verdicts_of
    from controller.remediation.settings import health_settings
    from controller.startup import begin, print_summary, publish
    from controller.summary import PUSH_JOB

    command = args.remediation_command
    started = begin(
        args,
        section=health_settings,
        asks_opa=command != "status",
        dry_run=getattr(args, "dry_run", None),
        pushgateway_url=getattr(args, "pushgateway_url", None),
        prometheus_url=args.prometheus_url,
    )
    if isinstance(started, int):
        return started
    kube, settings, health, log = started.kube, started.settings, started.section, started.log
    try:
        if command == "status":
            import time

            now = time.time() if args.now is None else args.now
            prom = Prometheus(settings.prometheus_url, timeout=settings.request_timeout_seconds)
            try:
                snapshot = take_health_snapshot(kube, prom, health, now=now, log=log)
            finally:
                prom.close()
            plan = plan_pass(snapshot, verdicts_of(snapshot, health), health, now)
            findings = {
                n: [f.as_dict() for f in v.faults] for n, v in plan.verdicts.items() if v.faults
            }
            document = {
                "now": now,
                "signals_error": snapshot.signals_error,
                "pools": [r.as_dict() for r in plan.pools.values()],
                "findings": {
                    n: [f.as_dict() for f in v.faults] for n, v in plan.verdicts.items() if v.faults
                },
                "unknown": sorted(n for n, v in plan.verdicts.items() if not v.known),
            }
            if args.json:
                sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
            else:
                for report in plan.pools.values():
                    print(
                        f"pool {report.name}: {report.out} of max {report.limit} out for health; {dict(report.states)}"
                    )
                    for node, why in sorted(report.waiting.items()):
                        print(f"  waiting {node}: {why}")
                    for node, note in sorted(report.notes.items()):
                        print(f"  {node}: {note}")
                for node, faults in findings.items():
                    for fault in faults:
                        print(
                            f"finding {node} GPU {fault['gpu']}: {fault['kind']}: {fault['reason']} [{fault['source']}]"
                        )
            return 0
        result = run_health_pass(
            kube=kube, fleet=started.fleet, settings=settings, health=health, now=args.now, log=log
        )
        if result.skipped:
            print(f"skipped: {result.skipped}")
        for node, state in sorted(result.acted.moved.items()):
            print(f"{node}: -> {state}")
        for node, cost in sorted(result.acted.returned.items()):
            print(
                f"{node}: back in service; cost {cost.get('gpu_hours_out_of_service')} GPU-hours out of service, {cost.get('gpu_hours_of_work_lost')} GPU-hours of work since checkpoints"
            )
        print_summary(result.summary)
        publish(result.summary, args, started.settings, log, job=f"{PUSH_JOB}-health")
        return 0 if result.ok else 1
    except ControllerError as error:
        # log events keep the name `health` (health.run.failed), whatever the command is called
        log.error(f"health.{command}.failed", error=str(error))
        print(f"remediation {command}: {error}", file=sys.stderr)
        return 1
    finally:
        kube.close()
