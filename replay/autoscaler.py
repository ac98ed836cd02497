"""The replay's model of the cluster autoscaler and the spot market: nodes requested for pods
that fit nowhere, ready after the provisioning delay, removed when empty long enough, pools
refilled to their minimum, and spot nodes interrupted at random.

- A pod that fits no ready node first takes room on nodes already on their way, else asks for
  a node of the cheapest pool it can use, up to `max_nodes`.
- A node empty for `scale_down_seconds` is removed unless its pool is at `min_nodes`; a pool
  below `min_nodes` (after an interruption) is refilled.
- A pool Karpenter scales (`replay.karpenter_rules`): an empty node goes after the fleet's
  `consolidate_after` plus Karpenter's own delay, not after `scale_down_seconds` (which is
  still the earliest a node is looked at). In a fleet with such pools, the pods asking for
  nodes at one moment are packed largest first, as Karpenter's queue orders them (the cluster
  autoscaler's estimator packs largest first too; fleets without Karpenter pools keep the
  scheduler's order, and their figures).
- Each spot node is interrupted after an exponential time (a rate per node-month); its pods
  lose their progress since their last checkpoint and are submitted again at once.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from replay.events import EMPTY_CHECK, INTERRUPT, NODE_READY
from replay.fleet import FleetState
from replay.karpenter_rules import karpenter_pools, provisioning_order
from replay.objects import MILLI, Job, PoolSpec, SimNode

SECONDS_PER_MONTH = 30 * 86400


class Autoscaler:
    def __init__(self, fleet: FleetState) -> None:
        self.fleet = fleet
        settings = fleet.settings
        self.spot_rate = settings.spot_interruptions_per_node_month / SECONDS_PER_MONTH
        self._rng = np.random.default_rng([settings.seed, zlib.crc32(fleet.scenario.name.encode())])
        self._node_seq = 0
        self.karpenter = karpenter_pools(fleet.scenario.fleet)

    def request_node(self, pool: PoolSpec, at: float, *, ready_now: bool = False) -> SimNode:
        """A node of the pool, billed from now and taking pods from `ready_now` or after the
        provisioning delay."""
        fleet = self.fleet
        self._node_seq += 1
        name = f"{pool.name}-{self._node_seq}"
        ready_at = at if ready_now else at + fleet.settings.provision_seconds
        node = SimNode(
            name=name,
            pool=pool,
            requested_at=at,
            ready_at=ready_at,
            view=pool.node_view(name),
            gpu_left=[MILLI] * pool.gpus_per_node,
            cpu_free=pool.cpu_milli,
            memory_free=pool.memory_mib,
        )
        fleet.add_node(node)
        if at > 0 or not ready_now:
            fleet.counters.nodes_requested += 1 if fleet.in_window(at) else 0
        fleet.events.push(ready_at, NODE_READY, node)
        return node

    def fill_minimums(self) -> None:
        """Every pool's `min_nodes`, ready at the start."""
        for pool in self.fleet.pools:
            for _ in range(pool.config.min_nodes):
                self.request_node(pool, 0.0, ready_now=True)

    def node_ready(self, node: SimNode, at: float) -> bool:
        if node.gone_at is not None:
            return False
        self.fleet.node_ready(node)
        node.empty_since = at
        events = self.fleet.events
        events.push(at + self.fleet.settings.scale_down_seconds, EMPTY_CHECK, (node, at))
        if node.pool.spot and self.spot_rate > 0:
            events.push(at + float(self._rng.exponential(1.0 / self.spot_rate)), INTERRUPT, node)
        return True

    def remove_node(self, node: SimNode, at: float) -> None:
        """Remove the node; refill its pool if that leaves it below `min_nodes`."""
        self.fleet.remove_node(node, at)
        if len(self.fleet.live[node.pool.name]) < node.pool.config.min_nodes:
            self.request_node(node.pool, at)

    def empty_check(self, node: SimNode, since: float, at: float) -> bool:
        """Scale down a node empty since `since`, if it still is."""
        if node.gone_at is not None or not node.ready or node.empty_since != since:
            return False
        if not node.empty or len(self.fleet.live[node.pool.name]) <= node.pool.config.min_nodes:
            return False
        karpenter = self.karpenter.get(node.pool.name)
        if karpenter is not None and at < since + karpenter.empty_removal_seconds:
            self.fleet.events.push(
                since + karpenter.empty_removal_seconds, EMPTY_CHECK, (node, since)
            )
            return False
        self.remove_node(node, at)
        return False

    def interrupt(self, target: SimNode | str, at: float) -> bool:
        """A spot interruption of the node (or of the oldest ready node of the named pool)."""
        fleet = self.fleet
        if isinstance(target, str):
            ready = [n for n in fleet.live.get(target, []) if n.ready]
            if not ready:
                return False
            target = min(ready, key=lambda n: (n.ready_at, n.name))
        node = target
        if node.gone_at is not None or not node.ready:
            return False
        if fleet.in_window(at):
            fleet.counters.spot_interruptions += 1
        fleet.interrupt_pods(node, at)
        self.remove_node(node, at)
        return True

    def scale_up(
        self,
        unplaced: Iterable[Job] | Iterable[Any],
        at: float,
        pools_of: Callable[[Any], Sequence[PoolSpec]] | None = None,
    ) -> None:
        """Nodes for pods that fit no ready node: first into room on nodes already coming,
        else a new node of the cheapest pool that can take them (GPUs, CPU, memory), within
        `max_nodes`. Room on coming nodes is counted in whole GPUs, CPU and memory.
        `pools_of`: the pools a pod may use, cheapest first (default: a GPU pod's,
        `FleetState.compatible_pools`; the CPU-only pods' own, `CpuWork.pools_for`)."""
        fleet = self.fleet
        pools_of = pools_of or fleet.compatible_pools
        if self.karpenter:
            unplaced = provisioning_order(unplaced)
        room: dict[str, list[list[int]]] = {}
        for pool in fleet.pools:
            room[pool.name] = [
                [n.free, n.cpu_free, n.memory_free] for n in fleet.live[pool.name] if not n.ready
            ]
        for job in unplaced:
            for pool in pools_of(job):
                limited = pool.cpu_milli > 0
                need = (job.gpus, job.cpu_milli if limited else 0, job.memory_mib if limited else 0)
                slots = room[pool.name]
                fit = next(
                    (s for s in slots if all(h >= n for h, n in zip(s, need, strict=True))), None
                )
                if fit is not None:
                    for i, n in enumerate(need):
                        fit[i] -= n
                    break
                whole = [pool.gpus_per_node, pool.cpu_milli, pool.memory_mib]
                if len(fleet.live[pool.name]) < pool.config.max_nodes and all(
                    h >= n for h, n in zip(whole, need, strict=True)
                ):
                    self.request_node(pool, at)
                    slots.append([h - n for h, n in zip(whole, need, strict=True)])
                    break
