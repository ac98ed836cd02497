"""The placement fleetplane's Volcano configuration makes (`fleet.volcano.SCHEDULER_TIERS`),
as a pack-mode policy; and `shipped_placement`, the seam a test against the real vc-scheduler
can compare with.

Volcano sums the node scores of its enabled plugins and takes a node with the highest total,
at random among equals (`util.SelectBestNodeAndScore`: equal float totals, then
`rand.Intn`); so does this model, with the experiment's generator. Of the shipped plugins,
two score nodes for a pod:

- binpack (pkg/scheduler/plugins/binpack): for each resource the pod requests that has a
  weight, weight x (used + requested) / allocatable; the sum divided by the weights' sum,
  times 100 x `binpack.weight`.
- nodeorder (pkg/scheduler/plugins/nodeorder), with Volcano's default weights unless given:
  leastrequested (1) is Kubernetes' LeastAllocated over cpu and memory (weights 50/50,
  integer arithmetic), balancedresource (1) is Kubernetes' BalancedAllocation over cpu, memory
  and nvidia.com/gpu (100 x (1 - the standard deviation of the requested fractions);
  resources the pod does not request are left out), mostrequested (0) is MostAllocated over
  cpu and memory. Node and pod affinity, image locality and topology spread give every node of
  the experiment the same score (0, or skipped), tainttoleration (3) 100 to every node without
  PreferNoSchedule taints: added as Volcano adds it, integers first and the binpack float
  last, so that equal totals are equal as Volcano's are.

One predicate beyond the resource fit is modelled, for the configurations compared with the
shipped one: resource-strategy-fit's proportional policy
(pkg/scheduler/plugins/resource-strategy-fit/proportional.go). A pod that asks for no GPU
passes a node only if what the node has idle after it stays at least `cpu` cores and `memory`
GB (10^9 bytes) per idle GPU; pods that ask for GPUs pass. The plugin's node scores
(`resourceStrategyFitWeight`, `sra`) are not modelled: a configuration with them is refused.

`replay.pack.realcheck` holds this model against the real vc-scheduler (v1.15.1); see
docs/replay.md, "The model against the real scheduler".

GPU shares are what time-slicing gives the trace's sharing pods: the pod's share of one GPU,
counted as that fraction of `nvidia.com/gpu` (predicates admit it when some GPU has room).
Which GPU a pod gets is the kubelet's device manager's choice, not the scheduler's: lowest
index first, for whole GPUs and shares alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fleet import labels
from fleet.fragmentation import RESERVE_CAP_MILLI, RESERVE_SHARE_OF_NODE
from fleet.volcano import (
    RESOURCE_STRATEGY_FIT,
    SCHEDULER_TIERS,
    plugin_arguments,
    reserve_cpu_for_gpus,
    with_arguments,
)
from replay.pack.cluster import MILLI, Cluster, Demand
from replay.pack.policies import Choice, Context, gpus_for
from replay.trace import PodRequest, TraceNode

MAX_NODE_SCORE = 100
MIB = 1 << 20


@dataclass(frozen=True)
class Proportional:
    """resource-strategy-fit's proportional predicate for `nvidia.com/gpu`: CPU cores and GB
    of memory kept idle per idle GPU, against pods that ask for no GPU."""

    cpu: float
    memory: float
    per_shape: bool = False
    """Each node's own CPU per idle GPU instead of `cpu` (`fleet.fragmentation.
    reserved_cpu_per_idle_gpu`): not a configuration Volcano can express (its predicate has
    one ratio), a placement that sees each node can (a scheduler extender's predicate)."""


@dataclass(frozen=True, kw_only=True)
class VolcanoWeights:
    """The scoring weights of a Volcano configuration (defaults: Volcano's), and the
    proportional predicate when it is enabled."""

    binpack: int = 0
    binpack_cpu: int = 1
    binpack_memory: int = 1
    binpack_gpu: int = 0
    least_requested: int = 1
    most_requested: int = 0
    balanced_resource: int = 1
    taint_toleration: int = 3
    """Every node scores 100 for it here (no PreferNoSchedule taints); 0 without nodeorder."""
    proportional: Proportional | None = None

    @classmethod
    def of(cls, tiers: list[dict[str, Any]]) -> VolcanoWeights:
        binpack = plugin_arguments(tiers, "binpack")
        nodeorder = plugin_arguments(tiers, "nodeorder")
        out: dict[str, int] = {}
        if binpack is not None:
            out["binpack"] = int(binpack.get("binpack.weight", 1))
            out["binpack_cpu"] = int(binpack.get("binpack.cpu", 1))
            out["binpack_memory"] = int(binpack.get("binpack.memory", 1))
            named = [r.strip() for r in str(binpack.get("binpack.resources", "")).split(",")]
            if labels.GPU_RESOURCE in named:
                out["binpack_gpu"] = int(binpack.get(f"binpack.resources.{labels.GPU_RESOURCE}", 1))
        if nodeorder is not None:
            out["least_requested"] = int(nodeorder.get("leastrequested.weight", 1))
            out["most_requested"] = int(nodeorder.get("mostrequested.weight", 0))
            out["balanced_resource"] = int(nodeorder.get("balancedresource.weight", 1))
            out["taint_toleration"] = int(nodeorder.get("tainttoleration.weight", 3))
        else:
            out |= {
                "least_requested": 0,
                "most_requested": 0,
                "balanced_resource": 0,
                "taint_toleration": 0,
            }
        fit = plugin_arguments(tiers, RESOURCE_STRATEGY_FIT)
        return cls(**out, proportional=None if fit is None else _proportional(fit))


def _proportional(arguments: dict[str, Any]) -> Proportional | None:
    """The proportional predicate of resource-strategy-fit's arguments (v1.15: nested
    `proportional: {enable, resources, resourceProportion}`), None when it is off. Volcano
    scores nodes with the plugin unless `resourceStrategyFitWeight` is 0 (missing or negative:
    10), and with `sra` when enabled; the model does not, so it refuses those."""
    weight = arguments.get("resourceStrategyFitWeight")
    if weight is None or int(weight) != 0:
        raise ValueError(
            f"{RESOURCE_STRATEGY_FIT}: resourceStrategyFitWeight is {weight!r} (missing or "
            "negative means 10); the model knows only the proportional predicate, so it must be 0"
        )
    if (arguments.get("sra") or {}).get("enable"):
        raise ValueError(f"{RESOURCE_STRATEGY_FIT}: the model does not score sra; disable it")
    policy = arguments.get("proportional") or {}
    if not policy.get("enable"):
        return None
    named = [r.strip() for r in str(policy.get("resources", "")).split(",")]
    if labels.GPU_RESOURCE not in named:
        # Other resources (TPUs) exist on no node of the trace: the predicate passes there.
        return None
    proportion = policy.get("resourceProportion") or {}

    def rate(key: str) -> float:
        value = float(proportion.get(f"{labels.GPU_RESOURCE}.{key}", 1.0))
        return 1.0 if value < 0 else value  # as calculateProportionalResources

    return Proportional(cpu=rate("cpu"), memory=rate("memory"))


SHIPPED = VolcanoWeights.of(SCHEDULER_TIERS)
"""The weights of the configuration components/volcano.py deploys."""


# Other configurations Volcano can express, written as scheduler tiers so that the real
# vc-scheduler can run them too (`realcheck`); docs/replay.md has their figures.


def gpu_binpack_tiers(tiers: list[dict[str, Any]] = SCHEDULER_TIERS) -> list[dict[str, Any]]:
    """The shipped tiers with binpack on accelerators only (`binpack.cpu: 0`,
    `binpack.memory: 0`) and nodeorder's spreading off (`leastrequested.weight: 0`,
    `balancedresource.weight: 0`)."""
    out = with_arguments(tiers, "binpack", {"binpack.cpu": 0, "binpack.memory": 0})
    return with_arguments(
        out, "nodeorder", {"leastrequested.weight": 0, "balancedresource.weight": 0}
    )


def most_requested_tiers(tiers: list[dict[str, Any]] = SCHEDULER_TIERS) -> list[dict[str, Any]]:
    """The shipped tiers with nodeorder packing CPU and memory instead of spreading them
    (`leastrequested.weight: 0`, `mostrequested.weight: 1`)."""
    return with_arguments(
        tiers, "nodeorder", {"leastrequested.weight": 0, "mostrequested.weight": 1}
    )


def no_spreading_tiers(tiers: list[dict[str, Any]] = SCHEDULER_TIERS) -> list[dict[str, Any]]:
    """The shipped tiers with nodeorder's spreading off (`leastrequested.weight: 0`,
    `balancedresource.weight: 0`), binpack as shipped."""
    return with_arguments(
        tiers, "nodeorder", {"leastrequested.weight": 0, "balancedresource.weight": 0}
    )


RESERVED_CPU_PER_GPU = 12
"""Cores kept idle per idle GPU against pods without GPUs: the trace's GPU pods ask for a
median 11.4 cores per GPU; its most common node has 12 per GPU (96 cores, 8 GPUs)."""
RESERVED_MEMORY_PER_GPU = 0
"""GB kept idle per idle GPU: none (reserving memory as well changed nothing measurable)."""


def reserve_cpu_for_gpus_tiers(
    tiers: list[dict[str, Any]] = SCHEDULER_TIERS,
    *,
    cpu: float = RESERVED_CPU_PER_GPU,
    memory: float = RESERVED_MEMORY_PER_GPU,
) -> list[dict[str, Any]]:
    """The proposal: the shipped tiers plus the CPU kept for idle GPUs, as a fleet gets them
    with `volcano.reserve_cpu_per_idle_gpu` (fleet.volcano.reserve_cpu_for_gpus)."""
    return reserve_cpu_for_gpus(tiers, cpu=cpu, memory=memory)


PER_SHAPE = Proportional(cpu=0, memory=0, per_shape=True)
"""The CPU kept for idle GPUs derived from each node's own shape (not expressible in Volcano)."""


class VolcanoScoring:
    """A pack-mode policy: the node a Volcano configuration's scores pick."""

    def __init__(self, weights: VolcanoWeights = SHIPPED) -> None:
        self.weights = weights

    def fitting(self, c: Cluster, d: Demand) -> np.ndarray:
        """The nodes Volcano's predicates pass for the pod: where it fits, and what the
        configuration's proportional predicate admits of those."""
        return self.admitted(c, d, c.fitting(d))

    def admitted(self, c: Cluster, d: Demand, nodes: np.ndarray) -> np.ndarray:
        """Of the nodes the pod fits on, those the proportional predicate passes: a pod that
        asks for GPUs passes; another only where the idle CPU (milli-cores) and memory
        (bytes) left after it are at least the rates x the node's idle milli-GPUs (Volcano's
        scalar resources are milli-units; memory's rate counts 10^6 bytes per milli-GPU)."""
        p = self.weights.proportional
        if p is None or d.num_gpu:
            return nodes
        idle = c.left_total[nodes].astype(float)
        if p.per_shape:
            # milli-cores per GPU, as reserved_cpu_per_idle_gpu: idle milli-GPUs x that / 1000
            rate = np.minimum(
                RESERVE_CAP_MILLI,
                np.floor(
                    RESERVE_SHARE_OF_NODE * c.cpu_capacity[nodes] / np.maximum(c.gpus[nodes], 1)
                ),
            )
            cpu_ok = (c.cpu_left[nodes] - d.cpu).astype(float) * MILLI >= idle * rate
        else:
            cpu_ok = (c.cpu_left[nodes] - d.cpu).astype(float) >= idle * p.cpu
        memory_ok = (c.memory_left[nodes] - d.memory).astype(float) * MIB >= idle * p.memory * 1e6
        return nodes[cpu_ok & memory_ok]

    def __call__(self, ctx: Context, d: Demand, nodes: np.ndarray) -> Choice:
        """Give it every node the pod fits on, not one per state (`Cluster.distinct`): a
        random pick among equals weighs each node alike, as Volcano's does."""
        scores = self.scores(ctx.cluster, d, nodes)
        best = nodes[scores == scores.max()]
        node = int(best[ctx.rng.integers(len(best))]) if len(best) > 1 else int(best[0])
        return node, gpus_for(ctx, node, d, "first")

    def scores(self, c: Cluster, d: Demand, nodes: np.ndarray) -> np.ndarray:
        w = self.weights
        cpu_alloc = c.cpu_capacity[nodes]
        mem_alloc = c.memory_capacity[nodes]
        gpu_alloc = c.gpus[nodes] * MILLI
        cpu_after = cpu_alloc - c.cpu_left[nodes] + d.cpu
        mem_after = mem_alloc - c.memory_left[nodes] + d.memory
        gpu_after = gpu_alloc - c.left_total[nodes] + d.gpu_milli_total
        # Volcano's total: 0.0 + the node-order functions (nodeorder's image locality, 0,
        # then binpack's float) + the batch scores (integers: leastrequested,
        # balancedresource, tainttoleration, ...).
        binpack = np.zeros(len(nodes), dtype=float)
        if w.binpack:
            parts, weight_sum = np.zeros(len(nodes)), 0
            for request, weight, used, alloc in (
                (d.cpu, w.binpack_cpu, cpu_after, cpu_alloc),
                (d.memory, w.binpack_memory, mem_after, mem_alloc),
                (d.gpu_milli_total, w.binpack_gpu, gpu_after, gpu_alloc),
            ):
                if request == 0 or weight == 0:
                    continue
                parts += np.where(alloc > 0, used * float(weight) / np.maximum(alloc, 1), 0.0)
                weight_sum += weight
            if weight_sum:
                parts = parts / weight_sum
            binpack = parts * float(MAX_NODE_SCORE * w.binpack)
        batch = np.full(len(nodes), w.taint_toleration * MAX_NODE_SCORE, dtype=np.int64)
        if w.least_requested:
            batch += w.least_requested * _allocated_score(
                cpu_after, cpu_alloc, mem_after, mem_alloc, least=True
            )
        if w.most_requested:
            batch += w.most_requested * _allocated_score(
                cpu_after, cpu_alloc, mem_after, mem_alloc, least=False
            )
        if w.balanced_resource and (d.cpu or d.memory or d.num_gpu):
            # Kubernetes skips BalancedAllocation for a pod that requests none of them.
            fractions = [
                np.minimum(cpu_after / np.maximum(cpu_alloc, 1), 1.0),
                np.minimum(mem_after / np.maximum(mem_alloc, 1), 1.0),
            ]
            if d.num_gpu:
                fractions.append(np.minimum(gpu_after / np.maximum(gpu_alloc, 1), 1.0))
            if len(fractions) == 2:
                std = np.abs((fractions[0] - fractions[1]) / 2)
            else:
                mean = (fractions[0] + fractions[1] + fractions[2]) / 3
                spread = sum((f - mean) * (f - mean) for f in fractions)
                std = np.sqrt(spread / 3)
            batch += w.balanced_resource * ((1.0 - std) * MAX_NODE_SCORE).astype(np.int64)
        return binpack + batch.astype(float)


def _allocated_score(
    cpu_after: np.ndarray,
    cpu_alloc: np.ndarray,
    mem_after: np.ndarray,
    mem_alloc: np.ndarray,
    *,
    least: bool,
) -> np.ndarray:
    """Kubernetes' LeastAllocated / MostAllocated over cpu and memory, equal weights, in its
    integer arithmetic."""

    def one(after: np.ndarray, alloc: np.ndarray) -> np.ndarray:
        safe = np.maximum(alloc, 1)
        if least:
            s = np.where(after > alloc, 0, (alloc - after) * MAX_NODE_SCORE // safe)
        else:
            s = np.minimum(after, alloc) * MAX_NODE_SCORE // safe
        return np.where(alloc > 0, s, 0)

    return (one(cpu_after, cpu_alloc) + one(mem_after, mem_alloc)) // 2


def shipped_placement(
    pods: Sequence[PodRequest], nodes: Sequence[TraceNode], *, seed: int = 0
) -> list[tuple[str, str | None, tuple[int, ...]]]:
    """Where the replay's model of the shipped Volcano configuration puts each pod, in order,
    without departures: (pod name, node name or None when it fits nowhere, GPU indices);
    ties drawn with `seed`. (`realcheck` compares the model with the real vc-scheduler.)"""
    cluster = Cluster(nodes)
    ctx = Context(cluster=cluster, rng=np.random.default_rng(seed))
    policy = VolcanoScoring()
    out: list[tuple[str, str | None, tuple[int, ...]]] = []
    for pod in pods:
        d = cluster.demand(pod)
        fitting = policy.fitting(cluster, d)
        if len(fitting) == 0:
            out.append((pod.name, None, ()))
            continue
        node, gpus = policy(ctx, d, fitting)
        cluster.place(node, d, gpus)
        out.append((pod.name, cluster.names[node], tuple(int(g) for g in gpus)))
    return out
