"""`fleetplane checkpoint`: record on the running pod that a checkpoint was just written."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "checkpoint",
        help="record a checkpoint on the running pod (fleetplane.dev/last-checkpoint)",
        description="Run inside a training pod right after a checkpoint is written: sets the "
        "pod's fleetplane.dev/last-checkpoint annotation (epoch seconds), which preemption and "
        "the drains read. Uses the pod's ServiceAccount and POD_NAME/POD_NAMESPACE from the "
        "downward API (docs/checkpoint.md).",
    )
    parser.add_argument(
        "--at",
        type=float,
        default=None,
        help="when the checkpoint was taken, in epoch seconds (default: now)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from fleetplane.checkpoint import CheckpointError, record

    try:
        value = record(args.at)
    except CheckpointError as error:
        print(f"fleetplane checkpoint: {error}", file=sys.stderr)
        return 2
    print(f"fleetplane.dev/last-checkpoint={value}")
    return 0
