"""The concern registry: the pass's order, entries that say which decide and act modules their
step uses, a registry light to import, and the command line made of it."""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import io
import subprocess
import sys
from pathlib import Path

import pytest

from controller import concerns as registry
from controller import reconcile
from controller.cli import add_parser
from controller.concerns import (
    CONCERNS,
    REGISTRY,
    Concern,
    PassView,
    concern,
    full_pass_description,
    idle,
)
from controller.config import Settings
from controller.log import Log
from controller.observe.snapshot import Snapshot
from tests.controller.builders import NOW, fleet

ROOT = Path(__file__).resolve().parents[2]

# The act Runtime every step is given is no concern's own act module.
SHARED = {"controller.act.runtime"}


def test_the_pass_runs_the_concerns_in_the_documented_order() -> None:
    assert CONCERNS == (
        "idle",
        "lifetime",
        "spend",
        "admission",
        "fairshare",
        "preempt",
        "fragmentation",
        "disruption",
        "burst",
    )
    assert [entry.name for entry in REGISTRY] == list(CONCERNS)
    assert concern("lifetime").name == "lifetime"
    assert full_pass_description() == (
        "One full pass: idle reclamation, work lifetimes, spend accounting, the gate's "
        "admission data, fair share, priority preemption, GPU fragmentation, autoscaler "
        "disruption marks, then bursting."
    )


def test_each_entry_names_the_decide_and_act_modules_of_its_step() -> None:
    for entry in REGISTRY:
        assert callable(entry.load_step()), entry.name
        module = importlib.import_module(entry.step.partition(":")[0])
        assert module.__file__ is not None
        tree = ast.parse(Path(module.__file__).read_text())
        imported = {
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
        }
        decide = {m for m in imported if m.startswith("controller.decide.")}
        act = {m for m in imported if m.startswith("controller.act.")} - SHARED
        assert decide == set(entry.decide), entry.name
        assert act == set(entry.act), entry.name
        for name in (*entry.decide, *entry.act):
            importlib.import_module(name)


def test_only_idle_reads_ahead_of_the_snapshot() -> None:
    assert {entry.name for entry in REGISTRY if entry.load_prefetch() is not None} == {"idle"}


def test_importing_the_registry_loads_no_concern() -> None:
    shown = subprocess.run(
        [sys.executable, "-c", "import sys, controller.concerns; print(*sorted(sys.modules))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    loaded = [m for m in shown if m.startswith(("controller.act", "controller.decide", "controller.observe", "controller.concerns."))]  # fmt: skip
    assert loaded == []


def help_of(*argv: str) -> str:
    parser = argparse.ArgumentParser(prog="fleetplane")
    add_parser(parser.add_subparsers())
    with contextlib.redirect_stdout(io.StringIO()) as shown, pytest.raises(SystemExit):
        parser.parse_args([*argv, "--help"])
    return " ".join(shown.getvalue().split())


def test_the_command_line_has_a_command_per_concern_with_its_help() -> None:
    for entry in REGISTRY:
        assert entry.description in help_of("controller", entry.name)
        assert entry.settings[0] in help_of("controller", entry.name)
    assert full_pass_description() in help_of("controller", "reconcile")
    listed = help_of("controller")
    for name in ("reconcile", *CONCERNS, "upgrade", "remediation"):
        assert f" {name} " in listed
    assert " health " not in listed  # the NVML check is `fleetplane health`, not a controller's


SEEN: list[frozenset[str]] = []


def quiet_step(view: PassView) -> None:
    """The step of the test's new concern: what it was told was already freed."""
    SEEN.append(view.freed)


class NoKube:
    requests_made = 0


def test_a_new_concern_is_one_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry added to the registry is run by the pass after the ones before it, given the
    pods they removed, and is a command with its help; neither reconcile.py nor cli.py
    changes."""
    entry = Concern(
        name="quiet",
        description="Quiet down noisy work, for this test.",
        phrase="quieting",
        settings=("controller",),
        decide=(),
        act=(),
        step=f"{__name__}:quiet_step",
    )
    monkeypatch.setattr(registry, "REGISTRY", (*registry.REGISTRY, entry))
    monkeypatch.setattr(idle, "evidence", lambda *a: {})
    monkeypatch.setattr(idle, "run", lambda view: {"uid-idle"})
    monkeypatch.setattr(
        reconcile,
        "take_snapshot",
        lambda kube, log=None, watched=None: Snapshot(
            taken_at=NOW, nodes={}, pods=[], namespaces={}, pdbs=[], priority_classes={}
        ),
    )
    SEEN.clear()
    summary = reconcile.run_pass(
        kube=NoKube(),  # type: ignore[arg-type]
        fleet=fleet(),
        settings=Settings(
            prometheus_url="http://127.0.0.1:9", opa_url="http://127.0.0.1:9", dry_run=True
        ),
        concerns=("idle", "quiet"),
        now=NOW,
        out=io.StringIO(),
        log=Log(),
    )
    assert [frozenset({"uid-idle"})] == SEEN
    assert summary.errors == 0
    assert ("phase_seconds", (("phase", "quiet"),)) in summary.values
    assert "Quiet down noisy work, for this test." in help_of("controller", "quiet")
    assert "bursting, then quieting." in help_of("controller", "reconcile")
