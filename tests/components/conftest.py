"""Fixtures of the component tests (helpers live in component_testkit)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from fleet.config import FleetConfig, load_stack_config, parse_fleet
from tests.components.component_testkit import (
    REPO_ROOT,
    STACKS,
    Declare,
    minimal_raw_fleet,
    run_program,
)


@pytest.fixture
def declare() -> Declare:
    """Run a build function as a Pulumi program under the mocks."""
    return run_program


@pytest.fixture(scope="session")
def stack_fleets() -> dict[str, FleetConfig]:
    return {s: load_stack_config(REPO_ROOT / "stacks" / f"Pulumi.{s}.yaml") for s in STACKS}


@pytest.fixture
def raw_fleet() -> dict[str, Any]:
    return minimal_raw_fleet()


@pytest.fixture
def fleet_from() -> Callable[[Callable[[dict[str, Any]], None] | None], FleetConfig]:
    """A validated fleet: the minimal one, changed by `edit` (in place) first."""

    def build(edit: Callable[[dict[str, Any]], None] | None = None) -> FleetConfig:
        raw = copy.deepcopy(minimal_raw_fleet())
        if edit is not None:
            edit(raw)
        return parse_fleet(raw)

    return build
