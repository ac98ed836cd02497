"""Month-to-date accelerator spend per team, and the accumulator that remembers deleted pods.

Cost of one pod = devices * price per device-hour * hours, where
- devices: the pod's demand of the node's model resource (whole devices; MIG devices are
  priced as whole GPUs, an upper bound);
- price: `models.<model>.price_per_hour_usd[<capacity type>]`, the model found from the
  node's labels (`node_label`/`label_value`), the capacity type from the node;
- hours: from the pod's start (startTime, else its PodScheduled time) clipped to the start
  of the month (UTC), to its end (last container termination for a finished pod, else now).

The API forgets pods once they are deleted, so a team's month-to-date spend cannot be
recomputed from the API alone. Each team keeps an accumulator, as compact JSON in the
annotation `fleetplane.dev/spend` on its first namespace:

    {"v":2,"month":"2026-11","gone":1234.5,"pods":{"<pod key>":1230,...},"alerts":["warn"]}

- `pods`: the cost so far, in whole cents, of every team pod that was in the API at the last
  pass, by pod key: the first 16 hex digits of its UID (`pod_key`; 60 random bits of a v4 UUID,
  so two of a team's pods share one with odds under 1e-11);
- `gone`: the cost of pods that have left the API this month (USD).

An entry is about 27 bytes (a full UID and a float took about 50: 4,000 pods made a 200 KB
annotation, most of the 256 KiB every annotation of an object may use together, and ~40 ms of
API server CPU per write). A version 1 accumulator (full UIDs, USD floats) is read and written
back as version 2.

Each pass: pods in `pods` but no longer in the API move their last known cost into `gone`;
`pods` becomes the cost of the pods in the API now; spend = gone + Σ pods. Writing `gone` and
`pods` in one annotation update keeps this idempotent: a pass that runs twice, or after a
crash, folds each deleted pod exactly once. A pod deleted between two passes is counted up to
the last pass that saw it (at most one period short). A new month starts from zero (pods still
running are clipped to the month start). The map holds the team's accelerator pods present in
the API, which the team's quota bounds; it is capped at `MAX_TRACKED_PODS` entries, keeping the
most expensive, so the annotation stays under 120 KB, well below the API's 256 KiB limit; a pod
dropped by the cap and deleted later is not counted (logged).

`alerts` remembers which budget thresholds (`warn`, `deny`) were announced this month, so the
Event on the team namespace fires once per month per threshold.

Speed: the replay runs `plan_spend` every period of every scenario (43,000 periods each over
the default trace, about 13 running pods a period), where it was half of the Python of the
`fixed` scenario. A node's rate (`node_rate`: model, capacity type, price) is found once per
node and the month start once per pass, and `TeamSpend` and `Accumulator` are views
(controller/views.py). On 8,602 passes recorded from the replay (a quarter of the trace,
`fixed`): 539 ms before, 484 ms after, 408 ms with the rates kept across passes as the replay
keeps them; the results are the same to the bit.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import orjson

from controller.config import FleetView, Model
from controller.observe.model import Node, Pod
from controller.views import view

MAX_TRACKED_PODS = 4000
THRESHOLDS = ("warn", "deny")


@dataclass(frozen=True, slots=True)
class _Month:
    name: str
    start: float
    end: float


_last_month = _Month("", 0.0, 0.0)


def _month(now: float) -> _Month:
    """The calendar month (UTC) of `now`; the last one asked is remembered, since every pass
    (and every pod of a pass) asks about the same month."""
    global _last_month
    known = _last_month
    # A second's margin before the month's end: the remembered answer is only used where
    # reading the clock again could not land in the next month.
    if known.start <= now < known.end - 1.0:
        return known
    moment = dt.datetime.fromtimestamp(now, dt.UTC)
    start = dt.datetime(moment.year, moment.month, 1, tzinfo=dt.UTC)
    following = dt.datetime(
        moment.year + moment.month // 12, moment.month % 12 + 1, 1, tzinfo=dt.UTC
    )
    found = _Month(moment.strftime("%Y-%m"), start.timestamp(), following.timestamp())
    _last_month = found
    return found


def month_of(now: float) -> str:
    return _month(now).name


def month_start(now: float) -> float:
    return _month(now).start


@view
class Accumulator:
    month: str
    gone_usd: float = 0.0
    pods: dict[str, float] = field(default_factory=dict)
    alerts: tuple[str, ...] = ()

    def encode(self) -> str:
        return orjson.dumps(
            {
                "v": 2,
                "month": self.month,
                "gone": round(self.gone_usd, 4),
                "pods": {key: round(usd * 100) for key, usd in sorted(self.pods.items())},
                "alerts": list(self.alerts),
            }
        ).decode()

    @classmethod
    def decode(cls, text: str | None) -> Accumulator | None:
        """None for a missing or unreadable annotation (the team then starts from the API).
        Version 1 (full UIDs, USD) is read into version 2's keys."""
        if not text:
            return None
        try:
            raw = orjson.loads(text)
            pods = raw.get("pods") or {}
            version = raw.get("v", 1)
            if version == 1:
                tracked = {pod_key(str(k)): float(v) for k, v in pods.items()}
            elif version == 2:
                tracked = {str(k): float(v) / 100 for k, v in pods.items()}
            else:
                return None
            return cls(
                month=str(raw["month"]),
                gone_usd=float(raw.get("gone", 0.0)),
                pods=tracked,
                alerts=tuple(str(a) for a in raw.get("alerts") or ()),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            return None


def pod_key(uid: str) -> str:
    """A pod's key in the accumulator: the first 16 hex digits of its UID (see the module
    doc)."""
    return uid.replace("-", "")[:16]


@view
class PodCost:
    pod: Pod
    team: str
    model: str
    capacity_type: str
    devices: int
    hours: float
    usd: float


Rate = tuple[Model, str, float]
"""What a node charges: its model, capacity type and USD per device-hour."""


def node_rate(node: Node, fleet: FleetView) -> Rate | None:
    """What the node charges per device-hour, or None when it is no priced accelerator node."""
    model = fleet.model_of_node(node.labels)
    if model is None:
        return None
    capacity_type = node.capacity_type
    price = model.price_per_hour_usd.get(capacity_type)
    return None if price is None else (model, capacity_type, price)


def pod_cost(
    pod: Pod,
    node: Node | None,
    fleet: FleetView,
    now: float,
    *,
    rates: dict[str, Rate | None] | None = None,
    since: float | None = None,
) -> PodCost | None:
    """The pod's cost this month, or None when it ran on no priced accelerator node.
    `rates` remembers each node's `node_rate` across the pods of one pass, `since` is
    `month_start(now)` (both are computed here when not given)."""
    if node is None or not pod.node_name:
        return None
    team = fleet.namespaces.get(pod.namespace)
    start = pod.started
    if team is None or start is None:
        return None
    if rates is None:
        rate = node_rate(node, fleet)
    elif node.name in rates:
        rate = rates[node.name]
    else:
        rate = rates[node.name] = node_rate(node, fleet)
    if rate is None:
        return None
    model, capacity_type, price = rate
    demand = pod.demand
    devices = demand.get(model.resource, 0) or (
        sum(demand.values()) if model.resource == "nvidia.com/gpu" else 0
    )
    if devices <= 0:
        return None
    end = pod.finished if pod.finished is not None else now
    start = max(start, month_start(now) if since is None else since)
    hours = max(0.0, min(end, now) - start) / 3600.0
    return PodCost(
        pod=pod,
        team=team,
        model=model.name,
        capacity_type=capacity_type,
        devices=devices,
        hours=hours,
        usd=devices * price * hours,
    )


@view
class TeamSpend:
    team: str
    month: str
    usd: float
    budget_usd: float
    live_usd: float
    gone_usd: float
    folded_pods: int
    accumulator: Accumulator
    previous: Accumulator | None
    crossed: tuple[str, ...]
    dropped_by_cap: int = 0

    @property
    def ratio(self) -> float:
        return self.usd / self.budget_usd if self.budget_usd > 0 else float("inf")

    def opa_record(self, now: float) -> dict[str, Any]:
        return {"month": self.month, "usd": round(self.usd, 2), "updated_at": int(now)}


def team_spend(
    team: str,
    costs: list[PodCost],
    previous: Accumulator | None,
    *,
    budget_usd: float,
    warn_ratio: float,
    deny_ratio: float,
    now: float,
) -> TeamSpend:
    """Fold the previous accumulator with the pods in the API now (see the module doc)."""
    month = month_of(now)
    carried = previous if previous is not None and previous.month == month else None
    live: dict[str, float] = {}
    for cost in costs:
        key = pod_key(cost.pod.uid)
        live[key] = live.get(key, 0.0) + cost.usd
    gone = carried.gone_usd if carried else 0.0
    folded = 0
    if carried:
        for key, usd in carried.pods.items():
            if key in live:
                # A pod's cost only grows; never forget what an earlier pass saw.
                live[key] = max(live[key], usd)
            else:
                gone += usd
                folded += 1
    dropped = 0
    if len(live) > MAX_TRACKED_PODS:
        kept = sorted(live.items(), key=lambda item: item[1], reverse=True)[:MAX_TRACKED_PODS]
        dropped = len(live) - len(kept)
        tracked = dict(kept)
    else:
        tracked = live
    live_usd = sum(live.values())
    usd = gone + live_usd
    alerts = set(carried.alerts if carried else ())
    crossed = []
    for name, ratio in (("warn", warn_ratio), ("deny", deny_ratio)):
        if budget_usd >= 0 and usd > ratio * budget_usd and name not in alerts:
            crossed.append(name)
            alerts.add(name)
    return TeamSpend(
        team=team,
        month=month,
        usd=usd,
        budget_usd=budget_usd,
        live_usd=live_usd,
        gone_usd=gone,
        folded_pods=folded,
        accumulator=Accumulator(
            month=month,
            gone_usd=gone,
            pods=tracked,
            alerts=tuple(a for a in THRESHOLDS if a in alerts),
        ),
        previous=previous,
        crossed=tuple(crossed),
        dropped_by_cap=dropped,
    )


@dataclass(kw_only=True)
class SpendPlan:
    teams: dict[str, TeamSpend]
    home: dict[str, str | None]
    """Namespace holding each team's accumulator: its first namespace that exists."""
    costs: dict[str, list[PodCost]]
    """The cost of each team's pods in the API now (to fold again after a write conflict)."""


def plan_spend(
    pods: list[Pod],
    nodes: dict[str, Node],
    namespaces: dict[str, Any],
    fleet: FleetView,
    accumulators: dict[str, Accumulator | None],
    now: float,
    *,
    rates: dict[str, Rate | None] | None = None,
) -> SpendPlan:
    """`rates` holds each node's `node_rate` by node name, found as the pods are costed: by
    default for this pass only; a caller whose nodes never change labels under one name (the
    replay) keeps it across passes."""
    costs: dict[str, list[PodCost]] = {name: [] for name in fleet.teams}
    rates = {} if rates is None else rates
    since = month_start(now)
    for pod in pods:
        if not pod.node_name:
            continue  # not running: no cost (pod_cost's first test, without the call)
        cost = pod_cost(pod, nodes.get(pod.node_name), fleet, now, rates=rates, since=since)
        if cost is not None and cost.team in costs:
            costs[cost.team].append(cost)
    teams = {
        name: team_spend(
            name,
            costs[name],
            accumulators.get(name),
            budget_usd=team.monthly_budget_usd,
            warn_ratio=fleet.warn_ratio,
            deny_ratio=fleet.deny_ratio,
            now=now,
        )
        for name, team in fleet.teams.items()
    }
    home = {
        name: next((ns for ns in team.namespaces if ns in namespaces), None)
        for name, team in fleet.teams.items()
    }
    return SpendPlan(teams=teams, home=home, costs=costs)
