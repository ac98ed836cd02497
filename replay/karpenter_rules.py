"""What the replay's autoscaler does differently for a pool Karpenter scales (the cluster's or
the pool's `autoscaler: karpenter`), as measured against the real Karpenter v1.8.2
(`bench/replay_karpenter.py`, docs/replay.md "Autoscaler held against Karpenter"):

- pods left unschedulable are packed onto new nodes largest first: Karpenter's provisioning
  queue sorts them by CPU, then memory, descending (`byCPUAndMemoryDescending`), then by
  creation; never by GPUs;
- an empty node goes `consolidate_after` (the fleet's `karpenter.consolidate_after`, not the
  replay's `scale_down_seconds`) plus Karpenter's own delay: its disruption controller looks
  every 10 s when it has nothing to do, and a consolidation command, emptiness too, waits 15 s
  (`consolidationTTL`) and is dropped if a pod landed meanwhile. Measured: 20-30 s after
  `consolidate_after`; the model takes 20 (15 + half the polling period).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fleet.config import FleetConfig

VALIDATION_SECONDS = 15.0
"""Karpenter's `consolidationTTL`: a disruption command is carried out this long after it is
computed, if it still holds."""
POLLING_SECONDS = 10.0
"""How often Karpenter's disruption controller looks for nodes to disrupt when idle."""

_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def duration_seconds(text: str) -> float:
    """A Go duration as the fleet configuration writes Karpenter's (`10m`, `1h30m`, `45s`)."""
    found = _DURATION.match(text)
    if found is None or not text:
        raise ValueError(f"not a duration: {text!r}")
    hours, minutes, seconds = (int(g) if g else 0 for g in found.groups())
    return float(hours * 3600 + minutes * 60 + seconds)


@dataclass(frozen=True)
class KarpenterPool:
    consolidate_after: float

    @property
    def empty_removal_seconds(self) -> float:
        """From a node's last pod leaving to the node removed."""
        return self.consolidate_after + VALIDATION_SECONDS + POLLING_SECONDS / 2


def karpenter_pools(fleet: FleetConfig) -> dict[str, KarpenterPool]:
    """The pools Karpenter scales, by name."""
    found = {}
    for cluster in fleet.clusters:
        after = duration_seconds(cluster.karpenter.consolidate_after)
        for pool in cluster.pools:
            if cluster.autoscaler_for(pool) == "karpenter":
                found[pool.name] = KarpenterPool(consolidate_after=after)
    return found


def provisioning_order(pods: Iterable[Any]) -> Sequence[Any]:
    """Karpenter's order of the pods it packs onto new nodes: CPU, then memory, descending;
    equal ones in the order given (the replay's order of arrival)."""
    return sorted(pods, key=lambda p: (-p.cpu_milli, -p.memory_mib))
