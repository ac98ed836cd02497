"""`fleetplane controller ...`: one idempotent pass of the in-cluster controller per run.

    fleetplane controller reconcile [--watch [--watch-interval S]] [--dry-run] [options]
    fleetplane controller idle|lifetime|spend|preempt|... [--dry-run] [options]
    fleetplane controller admission [--watch [--watch-interval S]] [--dry-run] [options]
    fleetplane controller upgrade run|status|clear|validate [options]
    fleetplane controller remediation run|status [options]

The pass's commands are the concern registry's (controller/concerns): a new concern's entry is
its command, with its help.

A CronJob runs `reconcile` every period; a Deployment runs `admission --watch`, which keeps the
gate's admission data current between periods (controller/admission_keeper.py). Resident
(`controller.resident`), the Deployment runs `reconcile --watch` instead: the same keeper, whose
pass once a period is the whole reconcile pass, and no CronJob runs it. This module
only builds the command line; what a pass needs (the Kubernetes client, OPA, Prometheus) is
imported when the command runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from controller import concerns
from controller.remediation import cli as remediation_cli
from controller.startup import add_dry_run, add_publish_options, common_options
from controller.upgrade import cli as upgrade_cli

EXIT_CODES = (
    "exit status: 0 the pass completed (or was skipped: another pass holds the Lease); "
    "1 an action or observation failed; 2 bad input (configuration, usage) or a part that is "
    "down (no credentials). Publishing the metrics is not part of the pass: a Pushgateway that "
    "is down or slow is logged (summary.push.failed) and leaves the exit status as it was."
)


def _pass_options() -> argparse.ArgumentParser:
    common = common_options(
        lease_name_help="name of the Lease (default: config controller.lease_name)"
    )
    common.add_argument(
        "--prometheus-url", help="Prometheus base URL (default: config controller.prometheus_url)"
    )
    add_dry_run(
        common, "decide and print every action it would take; change nothing (no Lease either)"
    )
    add_publish_options(common)
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
    return common


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add `controller` (its passes, and `upgrade`) to a command line's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "controller",
        help="the runtime controller: one idempotent pass per run (reconcile, upgrade, ...)",
        description="The fleetplane runtime controller: one idempotent pass per run, under a "
        "Lease, every destructive action asked of OPA first. " + EXIT_CODES,
    )
    commands = parser.add_subparsers(dest="controller_command", required=True, metavar="COMMAND")
    common = _pass_options()
    for name, description, settings in _commands():
        command = commands.add_parser(
            name,
            parents=[common],
            help=description,
            description=f"{description} {EXIT_CODES}",
            epilog=f"configuration read: {', '.join(settings)}" if settings else None,
        )
        command.set_defaults(run=run)
    commands.choices["admission"].add_argument(
        "--watch",
        action="store_true",
        help="keep running: a pass now, then one whenever a pod is created or deleted (at most "
        "one per --watch-interval) and one per controller period; under its own Lease "
        "(<name>-admission); until SIGTERM",
    )
    commands.choices["reconcile"].add_argument(
        "--watch",
        action="store_true",
        help="keep running (a resident controller, instead of a CronJob's run): pods and nodes "
        "listed once and kept by watch; a whole pass now and once per controller period, and "
        "between them the admission keeper's passes; until SIGTERM",
    )
    for name in ("admission", "reconcile"):
        commands.choices[name].add_argument(
            "--watch-interval",
            type=float,
            default=1.0,
            metavar="SECONDS",
            help="with --watch: the least time between two passes (default 1)",
        )
    upgrade_cli.add_parser(commands)
    remediation_cli.add_parser(commands)
    _add_front(commands)
    return parser


def _add_front(commands: Any) -> None:
    """`admission-front`: serves controller/admission_front.py where the API server calls the
    gate (opt-in: opa.admission_front)."""
    front = commands.add_parser(
        "admission-front",
        help="serve the admission front: each review judged by OPA one at a time, an allowed "
        "workload's reservation written before the answer (issue 33's budget race)",
    )
    front.add_argument("--listen", default="0.0.0.0:8443", metavar="HOST:PORT")
    front.add_argument("--tls-cert", required=True, help="the webhook's certificate file")
    front.add_argument("--tls-key", required=True, help="the webhook's key file")
    front.add_argument("--opa-url", required=True, help="the gate's OPA base URL")
    front.add_argument("--opa-ca", help="CA bundle for an HTTPS OPA")
    front.add_argument("--token-file", help="the front's bearer token file for OPA")
    front.add_argument(
        "--opa-service",
        metavar="NAMESPACE/NAME",
        help="the gate's OPA Service: each entry is written to every ready replica of it "
        "(default: --opa-url is the one OPA)",
    )
    front.add_argument(
        "--lease",
        metavar="NAME",
        help="serve only while holding this Lease in $POD_NAMESPACE (one front judges at once)",
    )
    front.add_argument("--lease-seconds", type=int, default=15, metavar="SECONDS")
    front.add_argument(
        "--hold-seconds",
        type=int,
        default=900,
        metavar="SECONDS",
        help="how long an entry holds before it lapses (default 900)",
    )
    front.add_argument("--kubeconfig", help="kubeconfig (default: in-cluster credentials)")
    front.set_defaults(run=_front)


def _front(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or SIGINT (exit 0); 2 on bad usage."""
    import os
    import signal
    import threading
    from pathlib import Path

    from controller.admission_front import AdmissionFront, Holding, serve

    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit():
        print("--listen must be HOST:PORT", file=sys.stderr)
        return 2
    if args.opa_service is not None and args.opa_service.count("/") != 1:
        print("--opa-service must be NAMESPACE/NAME", file=sys.stderr)
        return 2
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    kube = None
    if args.opa_service or args.lease:
        from controller.observe.kube import KubeClient

        kube = KubeClient.from_kubeconfig(args.kubeconfig)
    replicas = None
    if args.opa_service and kube is not None:
        from controller.observe.endpoints import ready_endpoints

        namespace, _, name = args.opa_service.partition("/")
        replicas = lambda: ready_endpoints(kube, namespace, name)  # noqa: E731
    holding = None
    if args.lease and kube is not None:
        from controller.lease import Lease
        from controller.log import Log

        lease_namespace = os.environ.get("POD_NAMESPACE", "default")
        lease = Lease(
            kube, namespace=lease_namespace, name=args.lease, seconds=args.lease_seconds, log=Log()
        )
        holding = Holding(lease, stop)
        if not holding.take():
            return 0
    front = AdmissionFront(
        args.opa_url,
        token_file=args.token_file,
        ca_file=args.opa_ca,
        replicas=replicas,
        holding=holding,
        hold_seconds=args.hold_seconds,
    )
    server = serve(front, host, int(port), tls=(Path(args.tls_cert), Path(args.tls_key)))
    stop.wait()
    server.shutdown()
    if holding is not None:
        holding.lease.release()  # the next front need not wait for it to lapse
    return 0


def _commands() -> list[tuple[str, str, tuple[str, ...]]]:
    """The pass's commands, from the concern registry: the full pass, then one per concern
    (name, help, the configuration it reads)."""
    return [
        ("reconcile", concerns.full_pass_description(), ()),
        *((entry.name, entry.description, entry.settings) for entry in concerns.REGISTRY),
    ]


def run(args: argparse.Namespace) -> int:
    """One pass of the concerns the command names; the exit status of EXIT_CODES."""
    from controller.reconcile import run_pass
    from controller.startup import begin, no_section, print_summary, publish
    from controller.summary import PUSH_JOB

    started = begin(
        args,
        section=no_section,
        prometheus_url=args.prometheus_url,
        dry_run=args.dry_run,
        scrape_interval_seconds=args.scrape_interval_seconds,
        eviction_grace_seconds=args.eviction_grace_seconds,
        act_concurrency=args.act_concurrency,
        pushgateway_url=args.pushgateway_url,
    )
    if isinstance(started, int):
        return started
    kube, fleet, settings, log = started.kube, started.fleet, started.settings, started.log
    command = args.controller_command
    if command in ("admission", "reconcile") and getattr(args, "watch", False):
        try:
            return _keep(args, kube, fleet, settings, log)
        finally:
            kube.close()
    only = None if command == "reconcile" else (command,)  # None: the whole registry
    try:
        summary = run_pass(
            kube=kube, fleet=fleet, settings=settings, concerns=only, now=args.now, log=log
        )
    finally:
        kube.close()
    print_summary(summary)
    publish(summary, args, settings, log, job=PUSH_JOB)
    return 1 if summary.errors else 0


def _keep(args: argparse.Namespace, kube: Any, fleet: Any, settings: Any, log: Any) -> int:
    """`admission --watch` or `reconcile --watch` until SIGTERM or SIGINT (exit 0)."""
    import signal
    import threading

    from controller.admission_keeper import keep_admission_data
    from controller.config import period_seconds
    from controller.startup import publish
    from controller.summary import PUSH_JOB

    if args.watch_interval <= 0:
        print("--watch-interval must be more than 0 seconds", file=sys.stderr)
        return 2
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    period = period_seconds(fleet, settings)
    resident = args.controller_command == "reconcile"
    keep_admission_data(
        kube=kube,
        fleet=fleet,
        settings=settings,
        interval=args.watch_interval,
        refresh=period,
        stop=stop,
        log=log,
        full_every=period if resident else None,
        publish=(lambda summary: publish(summary, args, settings, log, job=PUSH_JOB))
        if resident
        else None,
    )
    return 0
