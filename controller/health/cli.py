"""`fleetplane health check ...`: the command the driver-upgrade validator pod runs; `health
reset` and `health reboot`: what remediation's remedy pods run (controller/health/remedy.py).

Prints the verdict as JSON on stdout and exits 0 (healthy), 1 (unhealthy) or 2 (NVML
unavailable, or the check could not run). Command-line mistakes also exit 2, with argparse's
message on stderr and no verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import traceback
from typing import TYPE_CHECKING, Any

from controller.health.judge import Expectations
from controller.health.xids import CRITICAL_XIDS

if TYPE_CHECKING:
    from controller.health.observe import Nvml

# The defaults are written once, on Expectations.
_DEFAULTS = Expectations(driver_version="", gpu_count=0)

_EPILOG = f"""\
exit status: 0 healthy, 1 unhealthy, 2 NVML unavailable or the check could not run.
critical Xids: {", ".join(str(xid) for xid in sorted(CRITICAL_XIDS))}.
Set NODE_NAME from the downward API (spec.nodeName) in the validator pod."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add `health` (with `check`, `reset`, `reboot`) to a command line's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "health",
        help="NVML health check of this node's GPUs (what the validator pod runs)",
        description="NVML health check of this node's GPUs, run before the node takes work "
        "again after a GPU driver upgrade.",
    )
    commands = parser.add_subparsers(dest="health_command", required=True, metavar="COMMAND")
    check = commands.add_parser(
        "check",
        help="check the GPUs and print a JSON verdict",
        description="Check driver version, GPU count, ECC, retired pages / row remapping,\n"
        "temperature and Xid events through NVML; print a JSON verdict.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument(
        "--expect-driver",
        required=True,
        metavar="VERSION",
        help="NVIDIA driver version the node must run, as NVML reports it (e.g. 570.124.06)",
    )
    check.add_argument(
        "--expect-gpus",
        required=True,
        type=_positive_int,
        metavar="N",
        help="number of GPUs NVML must enumerate, each with a handle that opens",
    )
    check.add_argument(
        "--max-temperature-c",
        type=_positive_int,
        default=_DEFAULTS.max_temperature_c,
        metavar="C",
        help="highest acceptable GPU core temperature in Celsius (default %(default)s)",
    )
    check.add_argument(
        "--xid-wait-seconds",
        type=_wait_seconds,
        default=_DEFAULTS.xid_wait_seconds,
        metavar="S",
        help="how long to listen for critical Xid events, 0 to 60 (default %(default)s)",
    )
    check.add_argument(
        "--node",
        default=os.environ.get("NODE_NAME") or socket.gethostname(),
        help="node name reported in the verdict (default $NODE_NAME, else the host name)",
    )
    check.set_defaults(run=run)
    node_default = os.environ.get("NODE_NAME") or socket.gethostname()
    reset = commands.add_parser(
        "reset",
        help="reset GPUs with nvidia-smi (what the GPU-reset pod runs)",
        description="Per GPU: persistence mode off, nvidia-smi --gpu-reset -i N, persistence "
        "mode back as it was. Run on a drained node (controller/remediation).",
        epilog="exit status: 0 reset, 1 a reset failed, 2 nvidia-smi missing.",
    )
    reset.add_argument(
        "--gpu",
        action="append",
        required=True,
        type=_gpu_index,
        metavar="N",
        help="GPU index as nvidia-smi -i takes it (repeat for several)",
    )
    reset.add_argument("--node", default=node_default, help="node name reported in the result")
    reset.set_defaults(run=_run_reset)
    reboot = commands.add_parser(
        "reboot",
        help="reboot the host through systemd (what the reboot pod runs; needs hostPID)",
        description="Send PID 1 systemd's reboot signal (SIGRTMIN+5); refuse when PID 1 is "
        "not systemd.",
        epilog="exit status: 0 reboot started, 2 PID 1 is not systemd.",
    )
    reboot.add_argument("--node", default=node_default, help="node name reported in the result")
    reboot.set_defaults(run=_run_reboot)
    return parser


def _run_reset(args: argparse.Namespace) -> int:
    from controller.health.remedy import run_reset

    return run_reset(args.gpu, node=args.node)


def _run_reboot(args: argparse.Namespace) -> int:
    from controller.health.remedy import run_reboot

    return run_reboot(node=args.node)


def _gpu_index(text: str) -> str:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"not a GPU index: {text!r}")
    return text


def run(args: argparse.Namespace, *, nvml: Nvml | None = None) -> int:
    """Check the node; returns the exit status. `nvml` replaces the pynvml binding."""
    from controller.health.verdict import check_node, failed_verdict

    expect = Expectations(
        driver_version=args.expect_driver,
        gpu_count=args.expect_gpus,
        max_temperature_c=args.max_temperature_c,
        xid_wait_seconds=args.xid_wait_seconds,
    )
    try:
        verdict = check_node(expect, node=args.node, nvml=nvml)
    except Exception as err:
        # A broken check must never read as a verdict on the GPUs: report it as "could not check".
        traceback.print_exc(file=sys.stderr)
        verdict = failed_verdict(
            expect,
            node=args.node,
            check="internal",
            detail=f"the health check failed: {type(err).__name__}: {err}",
        )
    json.dump(verdict.document, sys.stdout, indent=2)
    sys.stdout.write("\n")
    sys.stdout.flush()
    return verdict.exit_code


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def _wait_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value <= 60:
        raise argparse.ArgumentTypeError(f"must be between 0 and 60: {value}")
    return value
