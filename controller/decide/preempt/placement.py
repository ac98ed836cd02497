"""Where a pod may run: the scheduling constraints (taints, node selector, required affinity,
resources), and every node where it fits once victims go, best first."""

from __future__ import annotations

from typing import Any

from controller.decide.preempt.candidates import as_candidate, select_victims
from controller.decide.preempt.ledger import Context, Ledger
from controller.decide.preempt.model import NodeOption
from controller.decide.preempt.ordering import victim_order
from controller.decide.preempt.quota import Quota
from controller.observe.model import Node, Pod


def tolerates(pod: Pod, taint: dict[str, Any]) -> bool:
    if taint.get("effect") not in ("NoSchedule", "NoExecute"):
        return True
    for toleration in pod.tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        if not toleration.get("key") and toleration.get("operator") == "Exists":
            return True
        if toleration.get("key") != taint.get("key"):
            continue
        if toleration.get("operator") == "Exists":
            return True
        if toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def _term_matches(term: dict[str, Any], labels: dict[str, str]) -> bool:
    for expression in term.get("matchExpressions") or ():
        key, operator = expression.get("key", ""), expression.get("operator")
        values = expression.get("values") or []
        value = labels.get(key)
        if operator == "In" and value not in values:
            return False
        if operator == "NotIn" and value in values:
            return False
        if operator == "Exists" and value is None:
            return False
        if operator == "DoesNotExist" and value is not None:
            return False
        if operator in ("Gt", "Lt"):
            try:
                number, bound = int(value or ""), int(values[0])
            except (ValueError, IndexError):
                return False
            if (operator == "Gt" and not number > bound) or (
                operator == "Lt" and not number < bound
            ):
                return False
    return not term.get("matchFields")


def fits(pod: Pod, node: Node) -> bool:
    """Whether the pod may run on the node, accelerators aside: Ready, schedulable, taints
    tolerated, node selector and required node affinity satisfied, the resources present.
    (CPU and memory are not modelled: accelerators are the scarce resource here.)"""
    if not node.ready or node.unschedulable:
        return False
    if any(node.allocatable.get(r, 0) < n for r, n in pod.demand.items()):
        return False
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    if pod.required_affinity and not any(
        _term_matches(term, node.labels) for term in pod.required_affinity
    ):
        return False
    return all(tolerates(pod, taint) for taint in node.taints)


def node_options(pod: Pod, context: Context, ledger: Ledger) -> tuple[list[NodeOption], str | None]:
    """Every node where the pod fits once victims go, best first (fewest victims, least work
    lost, name), and the first node where it fits already with no victim at all (then that
    node is the one option, with no victims)."""
    priority = context.priority_of(pod)
    team = context.fleet.namespaces.get(pod.namespace)
    options: list[NodeOption] = []
    for name in sorted(context.nodes):
        if not fits(pod, context.nodes[name]):
            continue
        need = {r: n - ledger.free[name].get(r, 0) for r, n in pod.demand.items()}
        if all(n <= 0 for n in need.values()):
            return [NodeOption(node=name, need=need, candidates=(), victims=())], name
        candidates = sorted(
            (
                c
                for victim in context.by_node.get(name, ())
                if (c := as_candidate(victim, pod, priority, team, context, ledger)) is not None
            ),
            key=victim_order,
        )
        victims = select_victims(candidates, need, Quota.of(context.fleet, ledger.usage, team))
        if victims is None:
            continue
        options.append(
            NodeOption(node=name, need=need, candidates=tuple(candidates), victims=tuple(victims))
        )
    options.sort(key=lambda o: (len(o.victims), o.work_lost, o.node))
    return options, None
