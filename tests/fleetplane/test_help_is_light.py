"""`fleetplane --help` (and every help built from the same parser) loads no Kubernetes client, no
protobuf, no numpy, plotting or Pulumi: each room's command line imports what a command needs
only when it runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

HEAVY = (
    "controller.observe.kube",
    "controller.observe.proto",
    "controller.observe.k8s_pb",
    "google.protobuf",
    "numpy",
    "matplotlib",
    "pulumi",
)

SHOW_HELP = """
import contextlib, io, json, sys
from fleetplane.cli import main
with contextlib.redirect_stdout(io.StringIO()) as shown, contextlib.suppress(SystemExit):
    main(sys.argv[1:])
print(json.dumps({"help": shown.getvalue(), "modules": sorted(sys.modules)}))
"""


def loaded_by_help(*argv: str) -> tuple[str, list[str]]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", SHOW_HELP, *argv],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    found = json.loads(result.stdout)
    return found["help"], found["modules"]


@pytest.mark.parametrize(
    "argv",
    [
        ("--help",),
        ("controller", "--help"),
        ("controller", "reconcile", "--help"),
        ("controller", "upgrade", "run", "--help"),
        ("controller", "remediation", "run", "--help"),
        ("health", "check", "--help"),
    ],
    ids=" ".join,
)
def test_help_loads_no_kubernetes_client_and_no_protobuf(argv: tuple[str, ...]) -> None:
    shown, modules = loaded_by_help(*argv)
    assert "usage: fleetplane" in shown  # the help was printed: the parser was built
    heavy = [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert heavy == []
    assert "controller.cli" in modules  # the controller's commands were part of it
