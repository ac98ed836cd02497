"""The fleet fixtures the component tests use too: the stack fleets and the minimal fleet; the
real Karpenter the Karpenter tests share; the real workload operators, and the controller's act
runtime on them, that the operator tests share."""

from tests.components.conftest import fleet_from, raw_fleet, stack_fleets
from tests.localfleet.karpenter_kit import karpenter
from tests.localfleet.operator_kit import operators, stops

__all__ = ["fleet_from", "karpenter", "operators", "raw_fleet", "stack_fleets", "stops"]
