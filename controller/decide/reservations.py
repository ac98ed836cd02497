"""`data.fleetplane.reservations`: what admitted workloads will still spend.

The spend document holds what a team's pods have cost up to the last pass. A workload admitted
since is priced by the gate against that spend alone, so many workloads admitted within one
period would each be judged as if the others did not exist. So each pass reserves, per team and
per workload (keyed by the uid of the workload the gate judged, `decide.lineage`), what its
live pods will still cost: devices x hourly price x the seconds left of their runtime bound.
Together with the spend (what they have cost so far) that is the workload's whole estimate,
counted once.

- Price: the pod's node's model at its capacity type; a pod not on a priced node yet, the
  dearest price of any model of its accelerator family (the gate prices at most that much).
- Seconds left: from the pod's start (now, when it has not started) to the workload type's
  `default_max_runtime_seconds`, counted by the hour (`STEP_SECONDS`): from the start of the
  current hour to the end of the hour the bound ends in. A type without one has no bound: it is reserved for
  `horizon_seconds` (two periods: until the spend includes what it ran).
- `expires_at` (epoch seconds, whole): the end of the hour in which the last bound ends, or
  the horizon does.
  The gate ignores an entry at or past it (`e.expires_at * 1e9 > now_ns` counts), so a
  reservation the controller stopped refreshing (the workload ended, the controller stopped)
  lapses on its own; each pass writes the whole document again from the live pods, so an
  ended workload's entry is gone at the next pass.
- `uids`: the objects between the top and its pods (a Deployment's ReplicaSets, a CronJob's
  Jobs): the gate does not count a workload's own reservation against itself.

Terminal pods and pods being deleted reserve nothing; namespaces of no team are not priced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from controller.config import FleetView, Model
from controller.decide.lineage import Lineage, lineage
from controller.observe.model import Node, Pod, family
from controller.observe.workload_objects import WorkloadObject
from controller.views import view


@view
class Reservation:
    team: str
    key: str
    kind: str
    name: str
    namespace: str
    usd: float
    expires_at: int
    uids: tuple[str, ...]
    pods: int
    """A view (controller.views): one per workload, so one per bare pod, 80,000 a pass at
    100,000 pods, where a frozen dataclass's construction cost about 0.15 CPU-s."""

    def entry(self) -> dict[str, Any]:
        return {"usd": round(self.usd, 2), "expires_at": self.expires_at, "uids": list(self.uids)}


@dataclass(kw_only=True)
class ReservationPlan:
    reservations: list[Reservation] = field(default_factory=list)

    def document(self) -> dict[str, dict[str, dict[str, Any]]]:
        """The document OPA reads: team -> {expiring: {expires_at: USD of the team's entries
        that expire then}, workloads: {workload uid: entry}, owners: {uid of an object between
        a workload and its pods: the workload's uid}} (a team with nothing reserved is absent,
        which the gate reads as nothing reserved). The gate sums the few unexpired buckets and
        takes away the reviewed object's own entries (policies/fleetplane/budget/budget.rego
        `reserved_by_expiry`): its work does not grow with the team's workloads."""
        found: dict[str, dict[str, dict[str, Any]]] = {}
        for reservation in self.reservations:
            team = found.setdefault(
                reservation.team, {"expiring": {}, "workloads": {}, "owners": {}}
            )
            entry = reservation.entry()
            team["workloads"][reservation.key] = entry
            for uid in reservation.uids:
                team["owners"][uid] = reservation.key
            at = str(reservation.expires_at)
            team["expiring"][at] = team["expiring"].get(at, 0.0) + entry["usd"]
        for team in found.values():
            team["expiring"] = {at: round(usd, 2) for at, usd in team["expiring"].items()}
        return found


STEP_SECONDS = 3600
"""Reservations change by the hour, not by the pass: the seconds left are counted from the
hour's start and to the end of the hour a bound ends in (or the horizon does), so a pass
reserves what the last one did unless a workload came, went or crossed an hour, and its writes
(a PATCH of what changed, controller/act/opa_patch.py) stay in proportion to that, where
seconds counted from `now` changed every entry of a 100,000-pod fleet every pass. Each entry
is over by less than two hours of its devices (the gate refuses more, never less)."""


def step_up(t: float) -> float:
    """`t` rounded up to the next step."""
    return math.ceil(t / STEP_SECONDS) * STEP_SECONDS


def runtime_bounds(fleet: FleetView) -> dict[str, int | None]:
    """Workload type -> its default_max_runtime_seconds (None without one)."""
    bounds: dict[str, int | None] = {}
    for name, workload_type in fleet.workload_types.items():
        value = workload_type.default_max_runtime_seconds
        bounds[name] = value if value is not None and value > 0 else None
    return bounds


def dearest_prices(models: dict[str, Model]) -> dict[str, float]:
    """Accelerator family -> the dearest hourly price of any of its models, any capacity."""
    dearest: dict[str, float] = {}
    for model in models.values():
        for price in model.price_per_hour_usd.values():
            dearest[model.resource] = max(dearest.get(model.resource, 0.0), price)
    return dearest


def node_price(node: Node, fleet: FleetView) -> float | None:
    """USD per hour of one device of the node's model at its capacity type; None when the
    node is of no priced model."""
    model = fleet.model_of_node(node.labels)
    return model.price_per_hour_usd.get(node.capacity_type) if model is not None else None


class _Total:
    """What one workload's pods reserve, summed over them (`plan_reservations`)."""

    __slots__ = ("ends", "namespace", "pods", "top", "uids", "usd")

    def __init__(self, top: Lineage, namespace: str) -> None:
        self.top, self.namespace = top, namespace
        self.usd, self.ends, self.pods = 0.0, 0.0, 0
        self.uids: set[str] = set()


def _by_key(item: tuple[tuple[str, str], _Total]) -> tuple[str, str]:
    return item[0]


def plan_reservations(
    pods: list[Pod],
    nodes: dict[str, Node],
    objects: dict[str, WorkloadObject],
    fleet: FleetView,
    now: float,
    horizon_seconds: float,
) -> ReservationPlan:
    # The hot loop of the concern: one pass over the pods, a slotted total per workload (not a
    # dict with a set each: most workloads of a fleet are one pod), the horizon's end once.
    bounds = runtime_bounds(fleet)
    dearest = dearest_prices(fleet.models)
    as_of = math.floor(now / STEP_SECONDS) * STEP_SECONDS
    horizon_ends = step_up(now + horizon_seconds)
    teams = fleet.namespaces
    node_prices: dict[str, float | None] = {}
    totals: dict[tuple[str, str], _Total] = {}
    for pod in pods:
        team = teams.get(pod.namespace)
        if team is None or pod.terminal or pod.deleting or pod.devices <= 0:
            continue
        bound = bounds.get(pod.workload_type or "")
        if bound is None:
            seconds, ends = horizon_seconds, horizon_ends
        else:
            start = pod.started if pod.started is not None else now
            if start + bound <= now:
                continue
            ends = step_up(start + bound)
            seconds = ends - as_of
        where = pod.node_name or ""
        if where in node_prices:
            price = node_prices[where]
        else:  # a node's model and capacity, looked up once for all its pods
            node = nodes.get(where)
            price = node_prices[where] = node_price(node, fleet) if node is not None else None
        if price is not None:
            hourly = pod.devices * price
        else:
            hourly = sum(n * dearest.get(family(r), 0.0) for r, n in pod.demand.items())
        top = lineage(pod.uid, "Pod", pod.name, pod.created, pod.owner, objects)
        key = (team, top.top_uid)
        total = totals.get(key)
        if total is None:
            total = totals[key] = _Total(top, pod.namespace)
        total.usd += hourly * seconds / 3600
        if ends > total.ends:
            total.ends = ends
        if top.between:  # a bare pod has nothing between it and itself
            total.uids.update(uid for uid in top.between if uid != pod.uid)
        total.pods += 1
    plan = ReservationPlan()
    plan.reservations = [
        Reservation(
            team=team,
            key=key,
            kind=total.top.kind,
            name=total.top.name,
            namespace=total.namespace,
            usd=total.usd,
            expires_at=math.ceil(total.ends),
            uids=tuple(sorted(total.uids)) if total.uids else (),
            pods=total.pods,
        )
        for (team, key), total in sorted(totals.items(), key=_by_key)
    ]
    return plan
