"""The trace's CPU-only pods in the time-driven replay: they arrive at their creation time, run
their traced time on the fleet's GPU nodes (as they did on the trace cluster's), and take CPU
and memory there that GPU pods need too, so a pod list with more CPU demand makes GPU pods
wait, keeps nodes up and asks for more of them.

What is modelled (docs/replay.md, "CPU-only pods"):

- They are not accelerator pods: the admission gate and the controller's concerns (idle,
  spend, preemption) are about accelerator pods, so they are not reviewed and the controller
  does not see them. They tolerate the GPU taint (the trace ran them on its GPU nodes) and no
  other, so they never land on spot or team-reserved pools.
- They are served after the GPU pods of the same instant (no priority class: priority 0, below
  every class of the fleet's workload types), in arrival order.
- A pod goes to the node where the shipped Volcano configuration's dominant score puts a pod
  without GPUs: binpack over CPU and memory (weight 1 each; binpack's GPU weight counts only
  for pods that ask for GPUs), i.e. the node whose CPU and memory are fullest after it, first
  by pool order and node age among equals. Where the fleet's Volcano configuration keeps CPU
  for idle GPUs (`fleet.volcano.reserve_cpu_per_idle_gpu`, resource-strategy-fit's
  proportional predicate), a node passes only if that much CPU per idle GPU stays idle after
  the pod.
- One that fits no ready node asks the autoscaler for a node (`Autoscaler.scale_up`), of the
  cheapest pool per node it fits on with the reservation kept.
- On a node that goes away they are submitted again at once and start over.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fleet import labels as keys
from fleet.fragmentation import reserved_cpu_per_idle_gpu
from replay.events import CPU_ARRIVE, CPU_COMPLETE, EMPTY_CHECK
from replay.objects import MILLI, PoolSpec, SimNode, State
from replay.trace import TracePod

if TYPE_CHECKING:
    from replay.fleet import FleetState

ReservePerIdleGpu = Callable[[PoolSpec], int]
"""Milli-cores a pod without GPUs must leave idle per idle GPU of a node of the pool."""


@dataclass(eq=False, slots=True, kw_only=True)
class CpuPod:
    """One CPU-only pod of the trace through the replay."""

    pod: TracePod
    index: int
    state: State = State.WAITING
    attempt: int = 0
    node: SimNode | None = None
    submitted_at: float | None = None
    pending_since: float | None = None
    run_start: float | None = None
    first_start: float | None = None
    finished_at: float | None = None
    gpus: int = 0
    """No GPUs (what the autoscaler counts room in)."""

    @property
    def cpu_milli(self) -> int:
        return self.pod.cpu_milli

    @property
    def memory_mib(self) -> int:
        return self.pod.memory_mib

    @property
    def run_seconds(self) -> float:
        return float(self.pod.run_seconds)


def tolerated(pool: PoolSpec) -> bool:
    """Whether a CPU-only pod of the trace may land on the pool's nodes: it tolerates the GPU
    taint and nothing else, and needs a node of known CPU and memory."""
    if not pool.cpu_milli:
        return False
    return all(
        t.get("key") == keys.GPU_RESOURCE or t.get("effect") == "PreferNoSchedule"
        for t in pool.taints
    )


def single_ratio(cores: float | None) -> ReservePerIdleGpu:
    """One reservation for every pool (Volcano's proportional predicate: `cores` per idle
    GPU), none for None."""
    milli = round((cores or 0) * 1000)
    return lambda _pool: milli


def per_shape(pool: PoolSpec) -> int:
    """Each pool's own reservation, from its node shape (`fleet.fragmentation`)."""
    return reserved_cpu_per_idle_gpu(pool.cpu_milli, pool.gpus_per_node)


class CpuWork:
    """The CPU-only pods of one scenario: pending, running, and where they go."""

    def __init__(
        self, fleet: FleetState, pods: Sequence[TracePod], reserve: ReservePerIdleGpu
    ) -> None:
        self.fleet = fleet
        self.pods = [CpuPod(pod=p, index=i) for i, p in enumerate(pods)]
        self.pending: dict[int, CpuPod] = {}
        self.running: dict[int, CpuPod] = {}
        self.reserve = {pool.name: reserve(pool) for pool in fleet.pools}
        self.pools = sorted(
            (p for p in fleet.pools if tolerated(p)),
            key=lambda p: (p.gpus_per_node * p.price_per_gpu_hour, p.name),
        )
        """Cheapest node first (the autoscaler's order)."""

    def submit_all(self) -> None:
        for cpu_pod in self.pods:
            self.fleet.events.push(float(cpu_pod.pod.created), CPU_ARRIVE, cpu_pod)

    def arrive(self, cpu_pod: CpuPod, at: float) -> bool:
        if cpu_pod.submitted_at is None:
            cpu_pod.submitted_at = at
        cpu_pod.state = State.PENDING
        cpu_pod.pending_since = at
        self.pending[cpu_pod.index] = cpu_pod
        return True

    def pools_for(self, cpu_pod: CpuPod) -> list[PoolSpec]:
        """Pools a new node of which would take the pod, reservation kept; cheapest first."""
        return [
            p
            for p in self.pools
            if p.cpu_milli - cpu_pod.cpu_milli >= p.gpus_per_node * self.reserve[p.name]
            and p.memory_mib >= cpu_pod.memory_mib
        ]

    def admits(self, node: SimNode, cpu_pod: CpuPod) -> bool:
        """The pod fits the node, and the CPU kept for its idle GPUs stays idle after it."""
        if cpu_pod.memory_mib > node.memory_free:
            return False
        left = node.cpu_free - cpu_pod.cpu_milli
        if left < 0:
            return False
        reserve = self.reserve[node.pool.name]
        return not reserve or left * MILLI >= sum(node.gpu_left) * reserve

    def best_node(self, cpu_pod: CpuPod) -> SimNode | None:
        """The ready node whose CPU and memory are fullest after the pod (the shipped binpack
        over CPU and memory), of those that admit it."""
        best: SimNode | None = None
        best_score = -1.0
        for pool in self.pools:
            cpu_total, memory_total = pool.cpu_milli, max(1, pool.memory_mib)
            for node in self.fleet.live[pool.name]:
                if not node.ready or not self.admits(node, cpu_pod):
                    continue
                score = (cpu_total - node.cpu_free + cpu_pod.cpu_milli) / cpu_total + (
                    memory_total - node.memory_free + cpu_pod.memory_mib
                ) / memory_total
                if score > best_score:
                    best, best_score = node, score
        return best

    def schedule(self, at: float) -> list[CpuPod]:
        """Start what fits now, in arrival order; the pods that fit no ready node."""
        unplaced: list[CpuPod] = []
        for cpu_pod in sorted(
            self.pending.values(), key=lambda c: (c.pending_since or 0.0, c.index)
        ):
            node = self.best_node(cpu_pod)
            if node is None:
                unplaced.append(cpu_pod)
            else:
                self.start(cpu_pod, node, at)
        return unplaced

    def start(self, cpu_pod: CpuPod, node: SimNode, at: float) -> None:
        del self.pending[cpu_pod.index]
        self.running[cpu_pod.index] = cpu_pod
        node.cpu_free -= cpu_pod.cpu_milli
        node.memory_free -= cpu_pod.memory_mib
        node.cpu_pods.append(cpu_pod)
        node.empty_since = None
        cpu_pod.state = State.RUNNING
        cpu_pod.node = node
        cpu_pod.run_start = at
        cpu_pod.pending_since = None
        if cpu_pod.first_start is None:
            cpu_pod.first_start = at
        self.fleet.events.push(at + cpu_pod.run_seconds, CPU_COMPLETE, (cpu_pod, cpu_pod.attempt))

    def stop(self, cpu_pod: CpuPod, at: float) -> None:
        node = cpu_pod.node
        assert node is not None
        del self.running[cpu_pod.index]
        node.cpu_pods.remove(cpu_pod)
        cpu_pod.node = None
        cpu_pod.run_start = None
        if node.gone_at is None:
            node.cpu_free += cpu_pod.cpu_milli
            node.memory_free += cpu_pod.memory_mib
            if node.empty:
                node.empty_since = at
                self.fleet.events.push(
                    at + self.fleet.settings.scale_down_seconds, EMPTY_CHECK, (node, at)
                )

    def complete(self, cpu_pod: CpuPod, attempt: int, at: float) -> bool:
        if cpu_pod.state is not State.RUNNING or cpu_pod.attempt != attempt:
            return False
        self.stop(cpu_pod, at)
        cpu_pod.state = State.DONE
        cpu_pod.finished_at = at
        return True

    def lose_node(self, node: SimNode, at: float) -> None:
        """The node is going away: its CPU-only pods are submitted again at once."""
        for cpu_pod in list(node.cpu_pods):
            self.stop(cpu_pod, at)
            cpu_pod.attempt += 1
            self.arrive(cpu_pod, at)
