"""The fleet fixtures the component tests use too: the stack fleets and the minimal fleet."""

from tests.components.conftest import fleet_from, raw_fleet, stack_fleets

__all__ = ["fleet_from", "raw_fleet", "stack_fleets"]
