"""The upgrade's configuration (every problem with its path) and its command line."""

from __future__ import annotations

import argparse
import copy
from typing import Any

import pytest

from controller.config import ConfigProblems, parse_config
from controller.startup import CONFIG_ENV
from controller.upgrade import cli
from controller.upgrade.settings import upgrade_settings
from fleet.config import load_stack_config
from fleet.project import stack_file
from fleet.render import render_opa_data
from tests.commands import fleetplane


def rendered() -> dict[str, Any]:
    return copy.deepcopy(render_opa_data(load_stack_config(stack_file("local"))))


def test_the_local_stack_renders_what_the_upgrade_needs() -> None:
    document = rendered()
    upgrade = upgrade_settings(parse_config(document))
    rolled = {n for n, p in document["pools"].items() if p.get("driver_version")}
    assert set(upgrade.pools) == rolled and rolled
    assert upgrade.windows
    assert upgrade.max_parallel == document["upgrade"]["max_parallel"]
    assert upgrade.wait_for_jobs_timeout_seconds == document["upgrade"]["drain_timeout_seconds"]
    assert upgrade.driver_namespace == "gpu-operator"
    assert str(upgrade.driver_selector) == "app=nvidia-driver-daemonset"
    assert upgrade.validator_namespace == document["controller"]["namespace"]


def test_every_problem_is_reported_with_its_path() -> None:
    document = rendered()
    name = next(iter(document["pools"]))
    document["pools"][name]["driver_version"] = "570.124.06"
    document["pools"][name]["max_unavailable"] = "ten percent"
    document["upgrade"] = {
        "maintenance_windows": [{"days": ["someday"], "start": "25:00"}],
        "max_parallel": 0,
        "validation_timeout_seconds": "long",
        "driver_selector": "app in (a,b)",
        "driver_namespace": "Not_A_Namespace",
        "xid_wait_seconds": 120,
    }
    with pytest.raises(ConfigProblems) as raised:
        upgrade_settings(parse_config(document))
    paths = sorted(p.split(":")[0] for p in raised.value.problems)
    assert paths == sorted(
        [
            f"pools.{name}.max_unavailable",
            "upgrade.maintenance_windows[0].days",
            "upgrade.maintenance_windows[0].start",
            "upgrade.max_parallel",
            "upgrade.validation_timeout_seconds",
            "upgrade.driver_selector",
            "upgrade.driver_namespace",
            "upgrade.xid_wait_seconds",
        ]
    )


def test_pools_whose_driver_comes_with_the_node_image_are_not_rolled() -> None:
    document = rendered()
    for pool in document["pools"].values():
        pool["driver_manager"] = "cloud"
    assert upgrade_settings(parse_config(document)).pools == {}


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="fleetplane controller")
    cli.add_parser(root.add_subparsers(dest="command", required=True))
    return root


def test_command_line_shape() -> None:
    root = parser()
    args = root.parse_args(["upgrade", "run", "--dry-run", "--config", "c.json", "--now", "5"])
    assert (args.command, args.upgrade_command, args.dry_run, args.now) == (
        "upgrade",
        "run",
        True,
        5,
    )
    assert args.run is cli.run
    args = root.parse_args(["upgrade", "clear", "gpu-7", "--config", "c.json"])
    assert (args.upgrade_command, args.node) == ("clear", "gpu-7")
    args = root.parse_args(["upgrade", "status", "--json"])
    assert args.json


@pytest.mark.parametrize("argv", [["upgrade", "--help"], ["upgrade", "run", "--help"]])
def test_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        parser().parse_args(argv)
    assert raised.value.code == 0
    text = capsys.readouterr().out
    assert ("status" in text and "clear" in text) if argv[1] == "--help" else "--dry-run" in text


def test_missing_config_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    assert fleetplane("controller", "upgrade", "status") == 2
    assert "--config" in capsys.readouterr().err
