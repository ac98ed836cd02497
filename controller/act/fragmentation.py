"""GPU fragmentation: no side effect on the cluster; each pool's measure goes into the pass's
summary (`fleetplane_pool_fragmented_accelerators`), which is written and pushed with the
pass's other metrics, and the alert `FleetplanePoolGpusFragmented` reads it against the pool's
allocatable accelerators."""

from __future__ import annotations

from controller.act.runtime import Runtime
from controller.decide.fragmentation import PoolFragmentation

CONCERN = "fragmentation"


def export_fragmentation(rt: Runtime, plan: list[PoolFragmentation]) -> None:
    for pool in plan:
        rt.summary.set(
            "pool_fragmented",
            pool.fragmented,
            pool=pool.pool,
            resource=pool.resource,
            model=pool.model,
            capacity_type=pool.capacity_type,
        )
    rt.log.info(
        "fragmentation.measured",
        pools={f"{p.pool}/{p.resource}": [p.fragmented, p.allocatable] for p in plan},
    )
