"""How many passes a driver rollout takes, against the lower bound, and what a pass costs.

Simulates one pool (1,000 nodes, max_unavailable 10% by default) over the controller's real,
pure planning code (`controller.upgrade.plan.plan_pass`) with no API server: an in-memory world
applies each planned step the way the cluster would (cordon, evictions, the driver DaemonSet
replacing a deleted driver pod, feature discovery relabelling the node one pass later, the
validator finishing one pass after it was created) and rebuilds the snapshot for the next pass.
OPA's allow is assumed (the policy's limit check is the same count as the planner's).

    python -m bench.upgrade_rollout [--nodes 1000] [--max-unavailable 10%] [--max-parallel N]
                                    [--job-fraction 0.3] [--seed 1]

Printed: passes to finish; admission waves (passes in which nodes left service) against the
lower bound ceil(N / maxUnavailable); the steps one node needs from admission back to service
(so the lower bound in passes is ceil(N / maxUnavailable) x that cycle, the waves being
pipelined); the most nodes out at once; and the planning time per pass (mean, max). With
`--job-fraction`, that share of nodes runs a job that needs 1 to 4 extra passes to finish.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import statistics
import time
from typing import Any

from controller.upgrade import states
from controller.upgrade.consumers import Role
from controller.upgrade.limits import DAYS, Window, resolve_max_unavailable
from controller.upgrade.observe import NodeView, PodView, Terminated, UpgradeSnapshot
from controller.upgrade.plan import Plan, plan_pass
from controller.upgrade.settings import PoolTarget, UpgradeSettings
from controller.upgrade.states import Detail
from controller.upgrade.steps import (
    Cordon,
    CreateValidator,
    DeleteValidator,
    Evict,
    RestartDriver,
    Uncordon,
)
from controller.upgrade.validator import termination_message
from fleet import labels as keys

OLD, NEW = "550.54.15", "570.124.06"
POOL = "bench"
PERIOD = 300  # seconds between passes (the CronJob's period)
HEALTHY_VERDICT = termination_message(
    {
        "status": "healthy",
        "healthy": True,
        "node": "",
        "driver_version": NEW,
        "device_count": 8,
        "expected": {"driver_version": NEW, "gpu_count": 8},
        "problems": [],
    }
)


def _labels(driver: str, state: str | None) -> dict[str, str]:
    major, minor, rev = driver.split(".")
    labels = {
        keys.POOL: POOL,
        keys.CUDA_DRIVER_MAJOR: major,
        keys.CUDA_DRIVER_MINOR: minor,
        keys.CUDA_DRIVER_REV: rev,
    }
    if state:
        labels[states.STATE_LABEL] = state
    return labels


@dataclasses.dataclass
class SimNode:
    """One node of the in-memory world."""

    name: str
    driver: str = OLD
    state: str | None = None
    since: float | None = None
    detail: Detail = dataclasses.field(default_factory=Detail)
    unschedulable: bool = False
    driver_uid: str = ""
    driver_generation: int = 0
    pending_driver: str | None = None  # the new driver pod started; GFD relabels next pass
    job_passes: int = 0  # passes until its job finishes
    service_pods: int = 1
    validators: dict[int, PodView] = dataclasses.field(default_factory=dict)
    validator_started: set[int] = dataclasses.field(default_factory=set)

    def view(self) -> NodeView:
        return NodeView(
            name=self.name,
            pool=POOL,
            labels=_labels(self.driver, self.state),
            annotations={},
            resource_version="1",
            unschedulable=self.unschedulable,
            ready=True,
            taints=(),
            gpu_capacity=8,
            gpu_allocatable=8,
            driver=self.driver,
            state=self.state,
            since=self.since,
            detail=self.detail,
        )

    def pods(self) -> list[PodView]:
        found = [_pod(f"{self.name}-driver", self.driver_uid, Role.DRIVER)]
        if self.job_passes > 0:
            found.append(_pod(f"{self.name}-job", f"{self.name}-job", Role.WORKLOAD, gpu=True))
        found += [
            _pod(
                f"{self.name}-svc-{i}",
                f"{self.name}-svc-{i}",
                Role.WORKLOAD,
                gpu=True,
                owner="ReplicaSet",
            )
            for i in range(self.service_pods)
        ]
        return found + list(self.validators.values())


def _pod(
    name: str,
    uid: str,
    role: Role,
    *,
    gpu: bool = False,
    owner: str | None = None,
    attempt: int | None = None,
    terminated: Terminated | None = None,
) -> PodView:
    return PodView(
        namespace="bench",
        name=name,
        uid=uid,
        labels={},
        role=role,
        owner_kind=owner,
        phase="Succeeded" if terminated else "Running",
        deleting=False,
        ready=True,
        gpu="requests nvidia.com/gpu" if gpu else None,
        last_checkpoint=None,
        attempt=attempt,
        terminated=terminated,
    )


class World:
    def __init__(self, nodes: int, *, job_fraction: float, seed: int) -> None:
        rng = random.Random(seed)
        self.nodes = {
            f"{POOL}-{i}": SimNode(
                name=f"{POOL}-{i}",
                driver_uid=f"{POOL}-{i}-driver-0",
                job_passes=rng.randint(1, 4) if rng.random() < job_fraction else 0,
            )
            for i in range(nodes)
        }

    def snapshot(self, now: float) -> UpgradeSnapshot:
        views = [n.view() for n in self.nodes.values()]
        pods = {n.name: n.pods() for n in self.nodes.values() if n.state in states.NEEDS_PODS}
        return UpgradeSnapshot(taken_at=now, nodes=views, pods=pods)

    def apply(self, plan: Plan) -> int:
        """Carry out the plan as the cluster would; returns the nodes admitted."""
        admitted = 0
        for step in plan.steps:
            node = self.nodes[step.node.name]
            for action in step.actions:
                if isinstance(action, Cordon):
                    node.unschedulable = True
                elif isinstance(action, Uncordon):
                    node.unschedulable = False
                elif isinstance(action, Evict):
                    if action.pod.owner_kind == "ReplicaSet":
                        node.service_pods = 0
                    else:
                        node.job_passes = 0
                elif isinstance(action, RestartDriver):
                    node.driver_generation += 1
                    node.driver_uid = f"{node.name}-driver-{node.driver_generation}"
                    node.pending_driver = NEW
                elif isinstance(action, CreateValidator):
                    attempt = int(
                        action.manifest["metadata"]["labels"][states.VALIDATOR_ATTEMPT_LABEL]
                    )
                    node.validators[attempt] = _pod(
                        action.manifest["metadata"]["name"],
                        f"v-{attempt}",
                        Role.VALIDATOR,
                        attempt=attempt,
                    )
                    node.validator_started.add(attempt)
                elif isinstance(action, DeleteValidator):
                    node.validators.pop(action.pod.attempt or -1, None)
            if step.detail is not None:
                node.detail = step.detail
            if step.next_state:
                if step.next_state == states.CORDON_REQUIRED:
                    admitted += 1
                node.state = step.next_state
                node.since = plan.now
            if step.state == states.UNCORDON_REQUIRED and node.state == states.UPGRADE_DONE:
                node.service_pods = 1  # the scheduler puts work back on it
        return admitted

    def tick(self) -> None:
        """Between passes: jobs progress, GFD relabels, validators finish."""
        for node in self.nodes.values():
            if node.job_passes > 0 and node.state in states.IN_PROGRESS:
                node.job_passes -= 1
            if node.pending_driver:
                node.driver, node.pending_driver = node.pending_driver, None
            for attempt, pod in list(node.validators.items()):
                if pod.terminated is None:
                    node.validators[attempt] = dataclasses.replace(
                        pod,
                        phase="Succeeded",
                        terminated=Terminated(
                            exit_code=0, message=HEALTHY_VERDICT, reason="Completed"
                        ),
                    )

    def unavailable(self) -> int:
        return sum(
            n.unschedulable or n.state in states.IN_PROGRESS or n.state == states.UPGRADE_FAILED
            for n in self.nodes.values()
        )

    def done(self) -> bool:
        return all(
            n.state == states.UPGRADE_DONE and not n.unschedulable for n in self.nodes.values()
        )


def simulate(
    nodes: int, max_unavailable: int | str, max_parallel: int, *, job_fraction: float, seed: int
) -> dict[str, Any]:
    settings = UpgradeSettings(
        pools={POOL: PoolTarget(name=POOL, driver_version=NEW, max_unavailable=max_unavailable)},
        windows=(Window(days=frozenset(DAYS), start=0, end=23 * 60 + 59),),
        max_parallel=max_parallel,
        wait_for_jobs_timeout_seconds=3600,
    )
    limit = resolve_max_unavailable(max_unavailable, nodes)
    assert limit is not None
    world = World(nodes, job_fraction=job_fraction, seed=seed)
    now = 1795219200.0  # a Saturday
    timings: list[float] = []
    waves = peak = passes = 0
    cycle: int | None = None
    first_admitted: dict[str, int] = {}
    while not world.done():
        passes += 1
        if passes > 100 * nodes:
            raise RuntimeError("the rollout does not converge")
        snapshot = world.snapshot(now)
        started = time.perf_counter()
        plan = plan_pass(snapshot, settings, now)
        timings.append(time.perf_counter() - started)
        for step in plan.steps:
            if step.next_state == states.CORDON_REQUIRED:
                first_admitted.setdefault(step.node.name, passes)
            if (
                step.next_state == states.UPGRADE_DONE
                and cycle is None
                and step.node.name in first_admitted
            ):
                cycle = passes - first_admitted[step.node.name] + 1
        if world.apply(plan):
            waves += 1
        peak = max(peak, world.unavailable())
        if peak > limit:
            raise AssertionError(f"limit exceeded: {peak} > {limit}")
        world.tick()
        now += PERIOD
    lower_waves = math.ceil(nodes / limit)
    return {
        "nodes": nodes,
        "max_unavailable": f"{max_unavailable} = {limit}",
        "max_parallel": max_parallel,
        "passes": passes,
        "waves": waves,
        "lower_bound_waves": lower_waves,
        "node_cycle_passes": cycle,
        "lower_bound_passes": lower_waves * (cycle or 0) + 1,
        "peak_unavailable": peak,
        "pass_ms_mean": statistics.mean(timings) * 1000,
        "pass_ms_max": max(timings) * 1000,
        "hours_at_period": passes * PERIOD / 3600,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.upgrade_rollout", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--max-unavailable", default="10%")
    parser.add_argument("--max-parallel", type=int, default=None, help="default: the pool's limit")
    parser.add_argument("--job-fraction", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    limit_value: int | str = (
        int(args.max_unavailable) if args.max_unavailable.isdigit() else args.max_unavailable
    )
    limit = resolve_max_unavailable(limit_value, args.nodes) or 1
    parallel = args.max_parallel or limit
    for fraction in dict.fromkeys((0.0, args.job_fraction)):
        result = simulate(args.nodes, limit_value, parallel, job_fraction=fraction, seed=args.seed)
        print(
            f"nodes {result['nodes']}, max_unavailable {result['max_unavailable']}, "
            f"max_parallel {result['max_parallel']}, nodes with a running job {fraction:.0%}"
        )
        print(
            f"  passes {result['passes']} (lower bound {result['lower_bound_passes']}: "
            f"{result['lower_bound_waves']} waves x {result['node_cycle_passes']} passes per node "
            f"+ 1 marking pass); admission waves {result['waves']} "
            f"(lower bound ceil(N/maxUnavailable) = {result['lower_bound_waves']})"
        )
        print(
            f"  peak unavailable {result['peak_unavailable']}; planning per pass "
            f"{result['pass_ms_mean']:.1f} ms mean, {result['pass_ms_max']:.1f} ms max; "
            f"{result['hours_at_period']:.1f} h at one pass per {PERIOD} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
