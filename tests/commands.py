"""Running the `fleetplane` command from tests: in this process (fast, for parsing and pure
commands), or as a child process (as a user or a pod runs it: exit status, stdout, stderr)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from fleetplane.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent


def fleetplane(*argv: str) -> int:
    """`fleetplane ARGV` in this process; its exit status."""
    return main(list(argv))


def parse(*argv: str) -> object:
    """The parsed arguments of `fleetplane ARGV` (nothing runs)."""
    return build_parser().parse_args(list(argv))


def run_fleetplane(
    *argv: str,
    env: Mapping[str, str] | None = None,
    cwd: Path = ROOT,
    module: str = "fleetplane",
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """`python -m fleetplane ARGV` as a child process (or another module that runs it, such as
    a shim putting a fake NVML in place)."""
    return subprocess.run(
        [sys.executable, "-m", module, *argv],
        cwd=cwd,
        env=dict(os.environ if env is None else env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
