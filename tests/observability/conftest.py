"""Fixtures of the observability tests: the local stack's configuration, and the pinned tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.config import FleetConfig, load_stack_config
from localfleet.binaries import bin_dir, require_binaries

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def local_fleet() -> FleetConfig:
    return load_stack_config(ROOT / "stacks" / "Pulumi.local.yaml")


@pytest.fixture(scope="session")
def promtool() -> Path:
    return require_binaries(bin_dir(), ("promtool",))["promtool"]
