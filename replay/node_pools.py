"""The replayed fleet's node pools, built from the trace's node list: one pool per node shape
(GPU model, GPUs, CPU and memory per node) and capacity type, sized to its share of the
trace's GPUs.

The trace's pod lists are samples of the traced cluster's work (the default list holds at
most 71 GPUs at once against 6,212 in the node list), so each shape's pool may grow to its
share of the trace's peak (at least one node), not to its count in the node list.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from replay.trace import TraceNode

TRACE_MODELS: dict[str, str] = {
    "G2": "alibaba-g2",
    "G3": "alibaba-g3",
    "P100": "p100",
    "T4": "t4",
    "V100M16": "v100-16gb",
    "V100M32": "v100-32gb",
    "A10": "a10",
}
"""The trace's GPU model names → fleetplane's catalog (`fleet.catalog.MODELS`)."""


@dataclass(frozen=True, kw_only=True)
class NodeShape:
    model: str
    """The catalog's model name."""
    gpus: int
    cpu_milli: int
    memory_mib: int
    count: int
    """Nodes of this shape in the node list."""

    @property
    def name(self) -> str:
        return f"{self.model}-{self.gpus}g-{self.cpu_milli // 1000}c-{self.memory_mib // 1024}g"


def catalog_model(trace_model: str) -> str:
    """The catalog name of a trace model (unknown names pass through, lower-cased)."""
    return TRACE_MODELS.get(trace_model, trace_model.lower())


def node_shapes(nodes: Iterable[TraceNode]) -> list[NodeShape]:
    """The node list's shapes, most GPUs first."""
    counts = Counter(
        (catalog_model(n.model), n.gpus, n.cpu_milli, n.memory_mib) for n in nodes if n.gpus > 0
    )
    shapes = [
        NodeShape(model=m, gpus=g, cpu_milli=c, memory_mib=mem, count=k)
        for (m, g, c, mem), k in counts.items()
    ]
    return sorted(shapes, key=lambda s: (-s.gpus * s.count, s.name))


def pools_for(
    shapes: list[NodeShape], spec: Mapping[str, Any], *, peak_gpus: int
) -> list[dict[str, Any]]:
    """Pool configurations (fleet schema) for one `trace_pools` entry of a scenario:
    `capacity_type` (on-demand), `share` of the peak (1.0), `always_on` (min_nodes =
    max_nodes), `round` (ceil, or floor for a fleet below the peak), `gpu_sharing`
    (the pools' time-slicing, none by default)."""
    capacity = str(spec.get("capacity_type", "on-demand"))
    share = float(spec.get("share", 1.0))
    rounding = math.floor if spec.get("round") == "floor" else math.ceil
    total = sum(s.gpus * s.count for s in shapes) or 1
    pools = []
    for shape in shapes:
        wanted = peak_gpus * share * shape.gpus * shape.count / total
        max_nodes = max(1, rounding(wanted / shape.gpus))
        pool: dict[str, Any] = {
            "name": f"{shape.name}-{'spot' if capacity == 'spot' else 'od'}",
            "model": shape.model,
            "machine_type": f"openb-{shape.name}",
            "accelerators_per_node": shape.gpus,
            "capacity_type": capacity,
            "min_nodes": max_nodes if spec.get("always_on") else 0,
            "max_nodes": max_nodes,
        }
        if spec.get("gpu_sharing"):
            pool["gpu_sharing"] = dict(spec["gpu_sharing"])
        pools.append(pool)
    return pools


def pool_gpus(shapes: list[NodeShape], *, peak_gpus: int, share: float = 1.0) -> int:
    """GPUs the pools of one `trace_pools` entry can hold at most."""
    return sum(
        p["max_nodes"] * p["accelerators_per_node"]
        for p in pools_for(shapes, {"share": share}, peak_gpus=peak_gpus)
    )
