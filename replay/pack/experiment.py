"""The packing experiment: pods arrive one after another, never leave, and each goes where the
policy puts it (or nowhere, when it fits no node), until the work that has arrived asks for
130 % of the cluster's GPUs; repeated with different draws.

As in the paper's experiments (the simulator's `--shuffle-pod`, `-tune 1.3`): the pod list is
shuffled, then pods drawn at random from it are appended until the GPUs asked for reach 1.3 x
the cluster's (`tuneUpPods`). Measured at each percent of arrived work (GPUs asked for so far,
as a share of the cluster's): the share of GPUs left unallocated, and the cluster's
fragmentation (`fragmentation`) as a share of all GPUs.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from replay.pack.cluster import Cluster
from replay.pack.fragmentation import Fragmentation, typical_pods
from replay.pack.policies import POLICIES, Context, Policy
from replay.pack.service import NAME as FGD_SERVICE
from replay.pack.service import FgdService
from replay.pack.volcano import (
    PER_SHAPE,
    SHIPPED,
    VolcanoScoring,
    VolcanoWeights,
    gpu_binpack_tiers,
    most_requested_tiers,
    no_spreading_tiers,
    reserve_cpu_for_gpus_tiers,
)
from replay.trace import PodRequest, TraceNode

TUNE_RATIO = 1.3
"""Work that arrives, as a multiple of the cluster's GPUs (the paper's experiments)."""
PERCENTS = np.arange(0, int(TUNE_RATIO * 100) + 1)


@dataclass(kw_only=True)
class Run:
    """One policy, one draw: the curves at each percent of arrived work."""

    policy: str
    seed: int
    unallocated: np.ndarray
    """Percent of GPUs unallocated at each of `PERCENTS`."""
    fragmentation: np.ndarray
    """The cluster's fragmentation, percent of all GPUs, at each of `PERCENTS`."""
    pods: int
    failed: int
    seconds: float
    cpu_seconds: float
    """CPU time of the draw (its wall time says more about the machine's other work)."""


@dataclass(kw_only=True)
class Result:
    trace: str
    nodes: int
    gpus: int
    runs: dict[str, list[Run]] = field(default_factory=dict)


def arrivals(
    pods: Sequence[PodRequest], capacity_milli: int, rng: np.random.Generator
) -> list[PodRequest]:
    """The pod list shuffled, then random draws from it appended while the GPUs asked for stay
    within `TUNE_RATIO` x the capacity (the simulator compares a draw's per-GPU share, not its
    total, and stops at the first draw that would pass: so do we)."""
    order = [pods[i] for i in rng.permutation(len(pods))]
    asked = sum(p.gpu_milli_total for p in pods)
    target = TUNE_RATIO * capacity_milli
    while True:
        drawn = pods[int(rng.integers(len(pods)))]
        if asked + drawn.gpu_milli > target:
            return order
        asked += drawn.gpu_milli_total
        order.append(drawn)


def policy_named(name: str) -> Policy:
    if name == FGD_SERVICE:
        return FgdService()
    if name == "volcano":
        return VolcanoScoring()
    if name.startswith("volcano:"):
        return VolcanoScoring(volcano_variant(name.split(":", 1)[1]))
    return POLICIES[name]


VOLCANO_VARIANTS: dict[str, VolcanoWeights] = {
    # Scoring: pack GPUs only (binpack on nvidia.com/gpu alone, no spreading by nodeorder);
    # nodeorder packing CPU and memory instead of spreading them; no spreading at all.
    "gpu-binpack": VolcanoWeights.of(gpu_binpack_tiers()),
    "most-requested": VolcanoWeights.of(most_requested_tiers()),
    "no-spreading": VolcanoWeights.of(no_spreading_tiers()),
    # Scoring as shipped, plus resource-strategy-fit's proportional predicate: pods without
    # GPUs keep off the CPU that idle GPUs need (12 cores per idle GPU); and the same
    # predicate with GPU-only binpack.
    "reserve-cpu-for-gpus": VolcanoWeights.of(reserve_cpu_for_gpus_tiers()),
    "gpu-binpack-reserve-cpu": VolcanoWeights.of(reserve_cpu_for_gpus_tiers(gpu_binpack_tiers())),
    # Scoring as shipped, the CPU kept for idle GPUs derived from each node's own shape (a
    # predicate Volcano cannot express with one ratio; a scheduler extender can).
    "reserve-cpu-per-shape": replace(SHIPPED, proportional=PER_SHAPE),
}
"""Other configurations Volcano can express (`volcano:<name>`), to compare with the shipped one."""


def volcano_variant(name: str) -> VolcanoWeights:
    if name not in VOLCANO_VARIANTS:
        raise ValueError(f"no Volcano variant {name!r} (known: {', '.join(VOLCANO_VARIANTS)})")
    return VOLCANO_VARIANTS[name]


def known_policies() -> list[str]:
    return [*POLICIES, "volcano", *(f"volcano:{v}" for v in VOLCANO_VARIANTS), FGD_SERVICE]


def run_once(pods: Sequence[PodRequest], nodes: Sequence[TraceNode], policy: str, seed: int) -> Run:
    began, cpu_began = time.perf_counter(), time.process_time()
    rng = np.random.default_rng(seed)
    cluster = Cluster(nodes)
    fragmentation = Fragmentation(cluster, typical_pods(pods))
    ctx = Context(cluster=cluster, rng=rng, fragmentation=fragmentation)
    place = policy_named(policy)
    order = arrivals(pods, cluster.capacity_milli, rng)
    capacity = cluster.capacity_milli
    unallocated = np.full(len(PERCENTS), np.nan)
    frag = np.full(len(PERCENTS), np.nan)
    asked = 0
    failed = 0
    mark = 0  # next percent to record

    def record_below(percent: float) -> None:
        """The state now stands for every percent of arrived work below `percent`."""
        nonlocal mark
        while mark < len(PERCENTS) and PERCENTS[mark] < percent:
            unallocated[mark] = 100.0 * (1 - cluster.allocated_milli / capacity)
            frag[mark] = 100.0 * fragmentation.total() / capacity
            mark += 1

    for pod in order:
        d = cluster.demand(pod)
        asked += d.gpu_milli_total
        record_below(100.0 * asked / capacity)
        fitting = (
            place.fitting(cluster, d) if isinstance(place, VolcanoScoring) else cluster.fitting(d)
        )
        if len(fitting) == 0:
            failed += 1
        else:
            if policy != "random" and not policy.startswith("volcano"):
                # Policies that break ties by name score one node per state; random picks
                # (and Volcano's among equals) weigh every node.
                fitting = cluster.distinct(fitting)
            node, gpus = place(ctx, d, fitting)
            cluster.place(node, d, gpus)
            fragmentation.update(node)
    record_below(float("inf"))
    return Run(
        policy=policy,
        seed=seed,
        unallocated=unallocated,
        fragmentation=frag,
        pods=len(order),
        failed=failed,
        seconds=time.perf_counter() - began,
        cpu_seconds=time.process_time() - cpu_began,
    )


def run(
    pods: Sequence[PodRequest],
    nodes: Sequence[TraceNode],
    policies: Sequence[str],
    seeds: Sequence[int],
    *,
    trace: str,
    jobs: int = 0,
) -> Result:
    """Every policy with every seed (the same seed shuffles and draws the same pods for each
    policy), in `jobs` worker processes (0: one per CPU)."""
    result = Result(trace=trace, nodes=len(nodes), gpus=sum(n.gpus for n in nodes))
    tasks = [(policy, seed) for policy in policies for seed in seeds]
    workers = min(len(tasks), jobs or os.cpu_count() or 1)
    if workers <= 1:
        done = [run_once(pods, nodes, p, s) for p, s in tasks]
    else:
        with ProcessPoolExecutor(max_workers=workers, mp_context=_fork()) as pool:
            done = list(pool.map(_run_task, [(pods, nodes, p, s) for p, s in tasks]))
    for r in done:
        result.runs.setdefault(r.policy, []).append(r)
    return result


def _run_task(args: tuple[Sequence[PodRequest], Sequence[TraceNode], str, int]) -> Run:
    return run_once(*args)


def _fork() -> Any:
    try:
        return multiprocessing.get_context("fork")
    except ValueError:
        return multiprocessing.get_context()
