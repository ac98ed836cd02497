"""What the controller's commands share on the command line: the options every one of them
takes, the start of a run (`begin`: configuration, settings, the command's own section,
Kubernetes credentials), with the exit status 2 for a configuration or usage problem, and the
pass's summary line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:  # the command line is built without loading what a run needs
    from controller.config import FleetView, Settings
    from controller.log import Log
    from controller.observe.kube import KubeClient
    from controller.summary import Summary

CONFIG_ENV = "FLEETPLANE_CONFIG"
USAGE_ERROR = 2

SectionT = TypeVar("SectionT")


def common_options(*, lease_name_help: str) -> argparse.ArgumentParser:
    """A parent parser with the options of every command: configuration, credentials, OPA, the
    Lease, the clock and the log level."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        type=Path,
        default=os.environ.get(CONFIG_ENV),
        help=f"rendered configuration document (JSON; `fleetplane render`); default ${CONFIG_ENV}",
    )
    common.add_argument(
        "--kubeconfig",
        help="kubeconfig file; default: in-cluster service account, else $KUBECONFIG",
    )
    common.add_argument("--opa-url", help="OPA base URL (default: config controller.opa_url)")
    common.add_argument("--opa-ca-file", help="CA bundle for an https OPA (default: config)")
    common.add_argument(
        "--opa-token-file",
        help="file with the controller's bearer token for OPA (default: config "
        "controller.opa_token_file)",
    )
    common.add_argument(
        "--lease-namespace", help="namespace of the Lease (default: config controller.namespace)"
    )
    common.add_argument("--lease-name", help=lease_name_help)
    common.add_argument(
        "--now",
        type=float,
        help="decide as if at this time (epoch seconds): replays and tests; default the clock",
    )
    common.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )
    return common


def command_group(
    subparsers: Any, name: str, *, help: str, description: str, lease_name_help: str
) -> tuple[argparse.ArgumentParser, Any, argparse.ArgumentParser]:
    """A command with actions of its own (`upgrade`, `remediation`): its parser, its actions'
    subparsers (the action is `args.<name>_command`) and the parent parser of the options
    every action takes."""
    common = common_options(lease_name_help=lease_name_help)
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help, description=description
    )
    actions = parser.add_subparsers(dest=f"{name}_command", required=True, metavar="ACTION")
    return parser, actions, common


def add_dry_run(parser: argparse.ArgumentParser, help: str) -> None:
    """`--dry-run`: None unless given, so the configuration's `controller.dry_run` holds."""
    parser.add_argument("--dry-run", action="store_true", default=None, help=help)


def add_publish_options(parser: argparse.ArgumentParser) -> None:
    """`--metrics-file` and `--pushgateway`: where a pass's summary is published at its end,
    the same options for every pass (reconcile, upgrade, remediation)."""
    parser.add_argument(
        "--metrics-file", type=Path, help="write the pass summary here (Prometheus text format)"
    )
    parser.add_argument(
        "--pushgateway",
        dest="pushgateway_url",
        help="push the pass's metrics to this Pushgateway (default: config "
        "controller.pushgateway_url; '' for none)",
    )


def publish(
    summary: Summary, args: argparse.Namespace, settings: Settings, log: Log, *, job: str
) -> None:
    """Publish a finished pass's summary: the textfile (`--metrics-file`) and the Pushgateway
    group `job` (each pass its own job, so the passes do not overwrite each other's series).
    Best effort: a Pushgateway that is down is logged, and the pass's exit status stays its own."""
    from controller.errors import TemporaryError

    metrics_file = getattr(args, "metrics_file", None)
    if metrics_file:
        summary.write_textfile(metrics_file)
    if settings.pushgateway_url:
        try:
            summary.push(settings.pushgateway_url, job=job)
        except TemporaryError as error:
            log.error("summary.push.failed", error=str(error), consequence="metrics not published")


def load(
    args: argparse.Namespace, *, asks_opa: bool = True, **overrides: Any
) -> tuple[FleetView, Settings] | int:
    """The configuration and the settings of a run (`overrides`: command-line settings beyond
    the common ones); USAGE_ERROR, said on stderr, when --config is missing or invalid, or
    when the OPA token file cannot be read by a command that asks OPA (`asks_opa`; read-only
    commands such as `status` never do, so they run without the token)."""
    from controller.act.opa import read_token
    from controller.config import ConfigProblems, Settings, load_config
    from controller.errors import PermanentError

    if args.config is None:
        print(f"--config (or ${CONFIG_ENV}) is required", file=sys.stderr)
        return USAGE_ERROR
    try:
        fleet = load_config(args.config)
        settings = Settings.from_config(
            fleet,
            opa_url=args.opa_url,
            opa_ca_file=args.opa_ca_file,
            opa_token_file=args.opa_token_file,
            lease_namespace=args.lease_namespace,
            lease_name=args.lease_name,
            **overrides,
        )
        if asks_opa and settings.opa_token_file is not None:
            read_token(settings.opa_token_file)  # every pass needs it: say so before starting
    except (ConfigProblems, PermanentError) as error:
        print(str(error), file=sys.stderr)
        return USAGE_ERROR
    return fleet, settings


def connect(args: argparse.Namespace, settings: Settings, log: Log) -> KubeClient | int:
    """The Kubernetes client of a run; USAGE_ERROR, logged and said on stderr, without
    credentials."""
    from controller.errors import ControllerError
    from controller.observe.kube import KubeClient

    try:
        return KubeClient.from_kubeconfig(
            args.kubeconfig, timeout=settings.request_timeout_seconds * 3
        )
    except ControllerError as error:
        log.error("kube.credentials", error=str(error))
        print(f"no Kubernetes credentials: {error}", file=sys.stderr)
        return USAGE_ERROR


@dataclass(frozen=True, kw_only=True)
class Started(Generic[SectionT]):
    """What a command has once it starts: the configuration, the settings, its own section of
    the configuration (`section`), a Kubernetes client (the command closes it) and its log."""

    fleet: FleetView
    settings: Settings
    section: SectionT
    kube: KubeClient
    log: Log


def begin(
    args: argparse.Namespace,
    *,
    section: Callable[[FleetView], SectionT],
    asks_opa: bool = True,
    **overrides: Any,
) -> Started[SectionT] | int:
    """The start every controller command shares: the log configured, the configuration and
    settings loaded (`load`), the command's own section read by `section` (its problems are a
    USAGE_ERROR, said on stderr), then the Kubernetes client (`connect`); an exit status when
    one of them fails."""
    from controller.config import ConfigProblems
    from controller.log import Log, configure

    configure(args.log_level)
    log = Log()
    loaded = load(args, asks_opa=asks_opa, **overrides)
    if isinstance(loaded, int):
        return loaded
    fleet, settings = loaded
    try:
        own = section(fleet)
    except ConfigProblems as error:
        print(str(error), file=sys.stderr)
        return USAGE_ERROR
    kube = connect(args, settings, log)
    if isinstance(kube, int):
        return kube
    return Started(fleet=fleet, settings=settings, section=own, kube=kube, log=log)


def no_section(fleet: FleetView) -> None:
    """For `begin`: a command that reads no section of its own."""


def print_summary(summary: Summary) -> None:
    """The pass's summary on stdout, one `SUMMARY {json}` line (what the CronJob's log keeps)."""
    import orjson

    sys.stdout.write("SUMMARY " + orjson.dumps(summary.as_dict()).decode() + "\n")
