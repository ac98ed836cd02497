"""What each team holds, waits for and burns right now: the team metrics of a pass, computed
from the snapshot alone (no request of its own; one loop over the accelerator pods).

- held: devices of the team's running pods, by resource, model, capacity type and workload
  type (the model and capacity type are the node's, as spend prices them: decide.spend);
- pending: devices of pods not yet placed on a node (model unknown: empty label);
- cost rate: held devices at their price per hour; integrated over a month it is the
  chargeback by team x workload type x model x capacity type (observability/report.py);
- queue wait: for each pod that started running within the last period, the time from its
  creation to its start, once (a pass runs every period, so a pod is seen starting once;
  a pass that runs late or not at all loses or double-counts the starts at the edges);
  the oldest pending pod's wait so far.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.config import FleetView, Model
from controller.observe.model import Node, Pod
from fleet import labels as keys

UNLABELLED = "unlabelled"
"""Workload type of a pod without the `fleetplane.dev/workload-type` label."""

UsageKey = tuple[str, str, str, str, str]
"""(team, resource, model, capacity type, workload type)"""


@dataclass(kw_only=True)
class TeamUsage:
    held: dict[UsageKey, int] = field(default_factory=dict)
    pending: dict[UsageKey, int] = field(default_factory=dict)
    cost_usd_per_hour: dict[tuple[str, str, str, str], float] = field(default_factory=dict)
    """(team, workload type, model, capacity type) -> USD per hour."""
    pods: dict[tuple[str, str, str], int] = field(default_factory=dict)
    """(team, workload type, running|pending) -> pods."""
    waits: list[tuple[str, str, float]] = field(default_factory=list)
    """(team, workload type, seconds from creation to running) of pods started this period."""
    oldest_pending: dict[tuple[str, str], float] = field(default_factory=dict)
    pools: dict[tuple[str, str, str, str, str], int] = field(default_factory=dict)
    """(pool, resource, model, capacity type, state) -> accelerators; state: allocatable
    (schedulable on Ready nodes), unavailable (cordoned or NotReady nodes), in-use (held by
    running pods)."""


def pool_inventory(
    nodes: dict[str, Node], pods: list[Pod], fleet: FleetView
) -> dict[tuple[str, str, str, str, str], int]:
    """Accelerators per pool, model and state (see `TeamUsage.pools`)."""
    found: dict[tuple[str, str, str, str, str], int] = {}
    described: dict[str, tuple[str, str, str]] = {}
    for node in nodes.values():
        model = fleet.model_of_node(node.labels)
        where = (node.labels.get(keys.POOL, ""), model.name if model else "", node.capacity_type)
        described[node.name] = where
        state = "allocatable" if node.ready and not node.unschedulable else "unavailable"
        for resource, count in node.accelerators.items():
            key = (where[0], resource, where[1], where[2], state)
            found[key] = found.get(key, 0) + count
    for pod in pods:
        on = described.get(pod.node_name or "")
        if on is None or pod.started is None or pod.terminal:
            continue
        for resource, devices in pod.demand.items():
            key = (on[0], resource, on[1], on[2], "in-use")
            found[key] = found.get(key, 0) + devices
    return found


def team_usage(
    pods: list[Pod], nodes: dict[str, Node], fleet: FleetView, now: float, period_seconds: float
) -> TeamUsage:
    usage = TeamUsage(pools=pool_inventory(nodes, pods, fleet))
    priced: dict[str, tuple[Model | None, str]] = {}
    for pod in pods:
        team = fleet.namespaces.get(pod.namespace)
        if team is None or pod.terminal or pod.deleting:
            continue
        workload = pod.workload_type or UNLABELLED
        node = nodes.get(pod.node_name or "")
        if node is None or pod.started is None:
            for resource, devices in pod.demand.items():
                key = (team, resource, "", "", workload)
                usage.pending[key] = usage.pending.get(key, 0) + devices
            state = (team, workload, "pending")
            usage.pods[state] = usage.pods.get(state, 0) + 1
            waited = max(0.0, now - pod.created)
            oldest = (team, workload)
            usage.oldest_pending[oldest] = max(usage.oldest_pending.get(oldest, 0.0), waited)
            continue
        known = priced.get(node.name)
        if known is None:
            known = priced[node.name] = (fleet.model_of_node(node.labels), node.capacity_type)
        model, capacity_type = known
        model_name = model.name if model else ""
        for resource, devices in pod.demand.items():
            key = (team, resource, model_name, capacity_type, workload)
            usage.held[key] = usage.held.get(key, 0) + devices
        state = (team, workload, "running")
        usage.pods[state] = usage.pods.get(state, 0) + 1
        if model is not None:
            devices = pod.demand.get(model.resource, 0)
            price = model.price_per_hour_usd.get(capacity_type)
            if devices and price is not None:
                cost = (team, workload, model_name, capacity_type)
                usage.cost_usd_per_hour[cost] = (
                    usage.cost_usd_per_hour.get(cost, 0.0) + devices * price
                )
        if now - period_seconds < pod.started <= now:
            usage.waits.append((team, workload, max(0.0, pod.started - pod.created)))
    return usage
