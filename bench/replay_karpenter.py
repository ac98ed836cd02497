"""The replay's autoscaler (`replay/autoscaler.py`) held against the real Karpenter, as the
replay's scheduler is held against the real vc-scheduler (`replay/pack/realcheck.py`).

One fixed list of arrivals (Volcano gangs and single pods of 1 to 8 GPUs, each with a start
and a run time, time compressed to seconds) goes twice through the same two H100 pools (an
on-demand and a spot one, `p5.48xlarge`, 8 GPUs, 96 CPUs, 1.5 TiB):

- real: Karpenter v1.8.2 with its KWOK provider, kwok and Volcano on the local control plane
  (`tests/localfleet/test_karpenter_replay.py` runs it, integration): each arrival is a Volcano
  Job created at its start and deleted at its end (kwok has no completion stage); the
  NodeClaims of each NodePool are sampled every second;
- model: the replay's `Autoscaler` over a `FleetState` of the same pools, with a small event
  loop of the same arrivals placed as the replay's scheduler places them (gangs whole, the
  fullest node that fits).

Figures per pool: peak nodes, node-seconds, the seconds from a pool's first arrival to its
first ready node (scale up), from its last pod's end to its last node gone (scale down), and
the share of the run where the model's node count equals the real one.

    python bench/replay_karpenter.py                 # the model's figures
    python bench/replay_karpenter.py --real RUN.json # and the real run's, side by side

RUN.json is what the integration test writes when FLEETPLANE_KARPENTER_REPLAY_OUT names a file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from controller.config import parse_config
from fleet.config import FleetConfig
from fleet.render import render_opa_data
from replay.accounting import Accounting
from replay.autoscaler import Autoscaler
from replay.events import ARRIVE, COMPLETE, EMPTY_CHECK, NODE_READY, EventQueue
from replay.fleet import FleetState
from replay.node_pools import NodeShape
from replay.objects import MILLI, PoolSpec, SimNode
from replay.scenarios import Scenario
from replay.settings import Settings

GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"
CPU_PER_GPU = 10
"""Cores a pod asks for per GPU: Karpenter orders pods by CPU, then memory, never by GPUs."""
MEMORY_GIB_PER_GPU = 128
NODE_CPU_MILLI = 96_000
NODE_MEMORY_MIB = 1536 * 1024
"""The local instance type's CPU and memory (`fleet.karpenter.NODE_CPU`, `NODE_MEMORY`)."""
ON_DEMAND, SPOT = "on-demand", "spot"


@dataclass(frozen=True)
class Arrival:
    name: str
    at: float
    seconds: float
    members: int
    gpus: int
    """Per member."""
    capacity: str
    """`on-demand` or `spot`: which of the two pools."""

    @property
    def end(self) -> float:
        return self.at + self.seconds


def _a(name: str, at: float, seconds: float, members: int, gpus: int, capacity: str) -> Arrival:
    return Arrival(name, at, seconds, members, gpus, capacity)


ARRIVALS: tuple[Arrival, ...] = (
    # on-demand (the on-demand team's queue holds 16 GPUs at once)
    _a("gang-a", 0, 40, 2, 8, ON_DEMAND),
    # a burst whose order of arrival packs into three nodes, largest first into two; then two
    # of its pods end early and leave two half-empty nodes (underutilized)
    _a("two", 60, 60, 1, 2, ON_DEMAND),
    _a("four-long", 60, 60, 1, 4, ON_DEMAND),
    _a("four-short", 60, 20, 1, 4, ON_DEMAND),
    _a("six", 60, 20, 1, 6, ON_DEMAND),
    _a("gang-b", 130, 30, 2, 4, ON_DEMAND),
    _a("one-a", 132, 25, 1, 1, ON_DEMAND),
    _a("one-b", 133, 25, 1, 1, ON_DEMAND),
    _a("two-b", 134, 25, 1, 2, ON_DEMAND),
    # spot (the spot team's queue holds 8 GPUs at once)
    _a("spot-four", 0, 70, 1, 4, SPOT),
    _a("spot-two-a", 5, 30, 1, 2, SPOT),
    _a("spot-two-b", 10, 50, 1, 2, SPOT),
    _a("spot-eight", 90, 30, 1, 8, SPOT),
    _a("spot-two-c", 125, 30, 1, 2, SPOT),
    _a("spot-two-d", 126, 30, 1, 2, SPOT),
    _a("spot-one-a", 127, 20, 1, 1, SPOT),
    _a("spot-one-b", 140, 10, 1, 1, SPOT),
    _a("spot-one-c", 145, 10, 1, 1, SPOT),
)
SHORT = tuple(a for a in ARRIVALS if a.end <= 120)
"""The integration test's default: the first two waves (about two and a half minutes)."""


@dataclass
class Curve:
    """Nodes per pool over time: (seconds, {pool: live nodes}, {pool: ready nodes}) samples,
    each holding until the next."""

    samples: list[tuple[float, dict[str, int], dict[str, int]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, at: float, live: dict[str, int], ready: dict[str, int]) -> None:
        if self.samples and self.samples[-1][1:] == (live, ready):
            return
        if self.samples and self.samples[-1][0] == at:
            self.samples.pop()
        self.samples.append((at, dict(live), dict(ready)))

    def count(self, pool: str, at: float, *, ready: bool = False) -> int:
        found = 0
        for when, live, up in self.samples:
            if when > at:
                break
            found = (up if ready else live).get(pool, 0)
        return found

    def to_json(self) -> dict[str, Any]:
        return {"samples": [list(s) for s in self.samples], "notes": self.notes}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Curve:
        curve = cls(notes=list(raw.get("notes", [])))
        for at, live, ready in raw["samples"]:
            curve.samples.append((float(at), dict(live), dict(ready)))
        return curve


# ---------------------------------------------------------------------------- figures


@dataclass(frozen=True)
class PoolFigures:
    peak: int
    node_seconds: float
    scale_up_seconds: float | None
    scale_down_seconds: float | None


def _steps(curve: Curve, pool: str, end: float, *, ready: bool = False) -> list[tuple[float, int]]:
    points = [(0.0, 0)]
    for at, live, up in curve.samples:
        if at > end:
            break
        points.append((at, (up if ready else live).get(pool, 0)))
    return points


def pool_figures(
    curve: Curve, pool: str, arrivals: Sequence[Arrival], capacity: str, end: float
) -> PoolFigures:
    steps = _steps(curve, pool, end)
    node_seconds = sum(
        count * ((steps[i + 1][0] if i + 1 < len(steps) else end) - at)
        for i, (at, count) in enumerate(steps)
    )
    mine = [a for a in arrivals if a.capacity == capacity]
    first = min(a.at for a in mine)
    last_end = max(a.end for a in mine)
    up = next((at for at, n in _steps(curve, pool, end, ready=True) if n > 0 and at >= first), None)
    down = next(
        (at for at, n in steps if at >= last_end and n == 0),
        None,
    )
    return PoolFigures(
        peak=max(n for _, n in steps),
        node_seconds=round(node_seconds, 1),
        scale_up_seconds=None if up is None else round(up - first, 1),
        scale_down_seconds=None if down is None else round(down - last_end, 1),
    )


def agreement(model: Curve, real: Curve, pool: str, end: float, step: float = 0.5) -> float:
    """The share of [0, end) where both count the same live nodes of the pool."""
    ticks = int(end / step)
    same = sum(model.count(pool, i * step) == real.count(pool, i * step) for i in range(ticks))
    return same / max(1, ticks)


def run_end(arrivals: Sequence[Arrival], tail: float) -> float:
    return max(a.end for a in arrivals) + tail


# ---------------------------------------------------------------------------- the model


def model_settings(provision_seconds: float, consolidate_after: float) -> Settings:
    return Settings(
        provision_seconds=provision_seconds,
        scale_down_seconds=consolidate_after,
        spot_interruptions_per_node_month=0.0,
    )


def check_scenario(fleet: FleetConfig) -> Scenario:
    """The fleet's pools as a replay scenario, their nodes the local instance type's shape."""
    document = render_opa_data(fleet)
    shape = {
        p.name: NodeShape(
            model=p.model,
            gpus=p.accelerators,
            cpu_milli=NODE_CPU_MILLI,
            memory_mib=NODE_MEMORY_MIB,
            count=0,
        )
        for p in fleet.pools
    }
    return Scenario(
        name="karpenter-check",
        title="the autoscaler against Karpenter",
        summary="",
        concerns=(),
        queueing="fifo",
        spot_types=(),
        fleet=fleet,
        document=document,
        view=parse_config(document),
        priorities={},
        pool_shapes=shape,
    )


@dataclass(eq=False)
class ModelPod:
    arrival: Arrival
    index: int
    gpus: int
    cpu_milli: int
    memory_mib: int
    node: SimNode | None = None
    slots: tuple[int, ...] = ()


def _member_pods(arrival: Arrival) -> list[ModelPod]:
    return [
        ModelPod(
            arrival,
            i,
            arrival.gpus,
            arrival.gpus * CPU_PER_GPU * 1000,
            arrival.gpus * MEMORY_GIB_PER_GPU * 1024,
        )
        for i in range(arrival.members)
    ]


def _fits(node: SimNode, pod: ModelPod) -> tuple[int, ...] | None:
    if pod.cpu_milli > node.cpu_free or pod.memory_mib > node.memory_free:
        return None
    free = [i for i, left in enumerate(node.gpu_left) if left == MILLI]
    return tuple(free[: pod.gpus]) if len(free) >= pod.gpus else None


def model_curve(
    fleet: FleetConfig,
    arrivals: Sequence[Arrival],
    pools: dict[str, str],
    settings: Settings,
    *,
    tail: float = 30.0,
    autoscaler: Callable[[FleetState], Autoscaler] = Autoscaler,
) -> Curve:
    """The model's nodes over time. `pools`: capacity (`on-demand`, `spot`) -> pool name.

    The pods are placed as the replay's scheduler places them: arrivals in order, a gang's
    members all or none, each pod on the fullest ready node it fits; what fits nowhere goes
    to `Autoscaler.scale_up`. A node's pods are held in its `cpu_pods` list, which is what
    `SimNode.empty` reads besides the replay's own jobs."""
    end = run_end(arrivals, tail)
    scenario = check_scenario(fleet)
    events = EventQueue()
    state = FleetState(
        scenario,
        settings,
        [],
        horizon=end,
        events=events,
        accounting=Accounting((0.0, end)),
        resubmit=lambda job, at, restart: None,
    )
    scaler = autoscaler(state)
    spec = {p.name: p for p in state.pools}
    pool_of: dict[str, PoolSpec] = {cap: spec[name] for cap, name in pools.items()}
    pending: list[list[ModelPod]] = []
    curve = Curve()
    for arrival in sorted(arrivals, key=lambda a: (a.at, a.name)):  # the real run's order
        events.push(arrival.at, ARRIVE, arrival)
    running: dict[str, list[ModelPod]] = {}

    def place(at: float) -> None:
        waiting: list[ModelPod] = []
        for gang in list(pending):
            pool = pool_of[gang[0].arrival.capacity]
            taken: list[tuple[ModelPod, SimNode, tuple[int, ...]]] = []
            for pod in gang:
                nodes = sorted(
                    (n for n in state.live[pool.name] if n.ready),
                    key=lambda n: (n.free, n.name),
                )
                for node in nodes:
                    slots = _fits(node, pod)
                    if slots is not None:
                        _take(node, pod, slots)
                        taken.append((pod, node, slots))
                        break
                else:
                    break
            if len(taken) == len(gang):
                pending.remove(gang)
                running[gang[0].arrival.name] = gang
                events.push(gang[0].arrival.end, COMPLETE, gang[0].arrival)
            else:
                for pod, node, _slots in taken:
                    _give(node, pod, at, events, settings, keep_since=True)
                waiting += gang
        if waiting:
            scaler.scale_up(waiting, at, pools_of=lambda pod: [pool_of[pod.arrival.capacity]])

    def sample(at: float) -> None:
        live = {p.name: len(state.live[p.name]) for p in state.pools}
        ready = {p.name: sum(n.ready for n in state.live[p.name]) for p in state.pools}
        curve.add(at, live, ready)

    dirty = False
    now = 0.0
    while True:
        if dirty and (not events or events.next_time() > now):
            place(now)  # may ask for nodes: their events come after
            sample(now)
            dirty = False
            continue
        if not events or events.next_time() > end:
            break
        at, kind, payload = events.pop()
        now = at
        if kind == ARRIVE:
            pending.append(_member_pods(payload))
            dirty = True
        elif kind == COMPLETE:
            for pod in running.pop(payload.name):
                assert pod.node is not None
                _give(pod.node, pod, at, events, settings)
            dirty = True
        elif kind == NODE_READY:
            dirty |= scaler.node_ready(payload, at)
        elif kind == EMPTY_CHECK:
            node, since = payload
            scaler.empty_check(node, since, at)
        sample(at)
    return curve


def _take(node: SimNode, pod: ModelPod, slots: tuple[int, ...]) -> None:
    for i in slots:
        node.gpu_left[i] = 0
    node.cpu_free -= pod.cpu_milli
    node.memory_free -= pod.memory_mib
    node.cpu_pods.append(pod)
    node.empty_since = None
    pod.node, pod.slots = node, slots


def _give(
    node: SimNode,
    pod: ModelPod,
    at: float,
    events: EventQueue,
    settings: Settings,
    *,
    keep_since: bool = False,
) -> None:
    """The pod leaves its node; a node left empty is checked for scale down, as
    `FleetState.free` does for the replay's jobs."""
    node.give_back(pod.slots, MILLI * len(pod.slots), pod.cpu_milli, pod.memory_mib)
    node.cpu_pods.remove(pod)
    pod.node, pod.slots = None, ()
    if node.gone_at is None and node.empty and not keep_since:
        node.empty_since = at
        events.push(at + settings.scale_down_seconds, EMPTY_CHECK, (node, at))


# ---------------------------------------------------------------------------- the real run


class Cluster(Protocol):
    """What the real run needs of `localfleet.controlplane.LocalCluster`."""

    def apply(self, objects: list[dict[str, Any]]) -> Any: ...
    def kubectl(self, *args: str, check: bool = True) -> Any: ...
    def get_json(self, *args: str) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Team:
    namespace: str
    queue: str


def volcano_job(arrival: Arrival, pool: str, team: Team) -> dict[str, Any]:
    """The arrival as a Volcano Job: its members a gang (minAvailable), pinned to the pool."""
    selector = {"fleetplane.dev/pool": pool, "nvidia.com/gpu.product": GPU_PRODUCT}
    if arrival.capacity == SPOT:
        selector["karpenter.sh/capacity-type"] = "spot"
    amounts = {
        "nvidia.com/gpu": str(arrival.gpus),
        "cpu": str(arrival.gpus * CPU_PER_GPU),
        "memory": f"{arrival.gpus * MEMORY_GIB_PER_GPU}Gi",
    }
    name = f"kr-{arrival.name}"
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": team.namespace},
        "spec": {
            "minAvailable": arrival.members,
            "queue": team.queue,
            "schedulerName": "volcano",
            "tasks": [
                {
                    "name": "worker",
                    "replicas": arrival.members,
                    "template": {
                        "metadata": {"labels": {"job": name}},
                        "spec": {
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                                    "resources": {"requests": amounts, "limits": amounts},
                                }
                            ],
                            "nodeSelector": selector,
                            "tolerations": [
                                {"key": "nvidia.com/gpu", "operator": "Exists"},
                                {"key": "fleetplane.dev/capacity-type", "operator": "Exists"},
                            ],
                            "terminationGracePeriodSeconds": 0,
                            "restartPolicy": "Never",
                        },
                    },
                }
            ],
        },
    }


def _claims(cluster: Cluster, pools: Iterable[str]) -> tuple[dict[str, int], dict[str, int]]:
    live = dict.fromkeys(pools, 0)
    ready = dict.fromkeys(pools, 0)
    for claim in cluster.get_json("nodeclaims")["items"]:
        pool = claim["metadata"].get("labels", {}).get("karpenter.sh/nodepool")
        if pool not in live or claim["metadata"].get("deletionTimestamp"):
            continue
        live[pool] += 1
        conditions = claim.get("status", {}).get("conditions", [])
        ready[pool] += any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    return live, ready


def real_curve(
    cluster: Cluster,
    arrivals: Sequence[Arrival],
    pools: dict[str, str],
    teams: dict[str, Team],
    *,
    tail: float = 30.0,
    sample_every: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
) -> Curve:
    """Create each arrival's Volcano Job at its start, delete it at its end; the live and
    ready NodeClaims of each pool every `sample_every` seconds until `tail` after the last
    end (longer, up to a minute more, while a pool still has nodes)."""
    steps = sorted(
        [(a.at, 1, a) for a in arrivals] + [(a.end, 0, a) for a in arrivals],
        key=lambda s: (s[0], s[1], s[2].name),
    )
    end = run_end(arrivals, tail)
    curve = Curve()
    start = clock()
    next_sample = 0.0
    while True:
        now = clock() - start
        while steps and steps[0][0] <= now:
            _, starting, arrival = steps.pop(0)
            team = teams[arrival.capacity]
            if starting:
                cluster.apply([volcano_job(arrival, pools[arrival.capacity], team)])
            else:
                cluster.kubectl(
                    "delete",
                    "jobs.batch.volcano.sh",
                    f"kr-{arrival.name}",
                    "-n",
                    team.namespace,
                    "--wait=false",
                    check=False,
                )
        if now >= next_sample:
            live, ready = _claims(cluster, pools.values())
            curve.add(round(clock() - start, 1), live, ready)
            next_sample = now + sample_every
            if now >= end and (not any(live.values()) or now >= end + 60):
                break
        time.sleep(0.1)
    return curve


# ---------------------------------------------------------------------------- report


def compare(
    model: Curve, real: Curve | None, arrivals: Sequence[Arrival], pools: dict[str, str], end: float
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    # the real run samples until its pools are empty, which may be past the planned end
    end = max([end, *(s[0] for s in real.samples)] if real is not None else [end])
    for capacity, pool in pools.items():
        entry: dict[str, Any] = {
            "model": asdict(pool_figures(model, pool, arrivals, capacity, end))
        }
        if real is not None:
            entry["real"] = asdict(pool_figures(real, pool, arrivals, capacity, end))
            entry["agreement"] = round(agreement(model, real, pool, end), 3)
        out[pool] = entry
    return out


def print_figures(figures: dict[str, Any]) -> None:
    for pool, entry in figures.items():
        print(pool)
        for key in ("peak", "node_seconds", "scale_up_seconds", "scale_down_seconds"):
            row = f"  {key:20} model {entry['model'][key]!s:>8}"
            if "real" in entry:
                row += f"   real {entry['real'][key]!s:>8}"
            print(row)
        if "agreement" in entry:
            print(f"  {'same node count':20} {entry['agreement']:.0%} of the run")


def default_fleet() -> FleetConfig:
    """The Karpenter tests' fleet (two H100 pools); imported late: it lives with the tests."""
    from tests.localfleet.karpenter_kit import local_fleet

    return local_fleet()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", type=Path, help="a real run's curve (JSON) to compare with")
    parser.add_argument("--short", action="store_true", help="the test's short arrival list")
    parser.add_argument("--provision-seconds", type=float, default=PROVISION_SECONDS)
    parser.add_argument("--consolidate-after", type=float, default=5.0)
    parser.add_argument("--tail", type=float, default=30.0)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    from tests.localfleet.karpenter_kit import ON_DEMAND as OD_POOL
    from tests.localfleet.karpenter_kit import SPOT as SPOT_POOL

    pools = {ON_DEMAND: OD_POOL, SPOT: SPOT_POOL}
    arrivals = SHORT if args.short else ARRIVALS
    settings = model_settings(args.provision_seconds, args.consolidate_after)
    model = model_curve(default_fleet(), arrivals, pools, settings, tail=args.tail)
    real = Curve.from_json(json.loads(args.real.read_text())) if args.real else None
    figures = compare(model, real, arrivals, pools, run_end(arrivals, args.tail))
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print_figures(figures)
    return 0


PROVISION_SECONDS = 6.0
"""From a pod left pending to its node ready on the local fleet: Karpenter's batch window
(1 s idle), the KWOK provider's node, kwok's Ready stage and Karpenter's registration."""


if __name__ == "__main__":
    sys.exit(main())
