"""The fleet fixtures the component tests use too: the stack fleets and the minimal fleet; and
the real Karpenter the Karpenter tests share."""

from tests.components.conftest import fleet_from, raw_fleet, stack_fleets
from tests.localfleet.karpenter_kit import karpenter

__all__ = ["fleet_from", "karpenter", "raw_fleet", "stack_fleets"]
