"""A driver upgrade never drains part of a gang (a Volcano PodGroup): a node running a pod of a
gang whose other pods run elsewhere is admitted together with all of those nodes when the slots
allow, or waits and says why; act asks OPA about every node of such a group before starting any.
"""

from __future__ import annotations

import io
from typing import Any

from controller.act.events import EventRecorder
from controller.act.opa import Decision
from controller.act.runtime import Runtime
from controller.config import Settings
from controller.summary import Summary
from controller.upgrade import states
from controller.upgrade.act import act_on_plan
from controller.upgrade.observe import GANG_ANNOTATION, UpgradeSnapshot, take_upgrade_snapshot
from controller.upgrade.plan import Plan, plan_pass
from controller.upgrade.settings import PoolTarget
from tests.controller.builders import fleet
from tests.controller.upgrade.builders import (
    ALWAYS,
    NEW,
    POOL,
    SATURDAY_NOON,
    SETTINGS,
    NodeBuilder,
    PodBuilder,
    node,
    pod,
    settings,
)

NOW = SATURDAY_NOON


def gang_member(name: str, on: str, gang: str = "pg") -> PodBuilder:
    builder = pod(name).on(on).gpus(8)
    builder.raw["metadata"]["annotations"][GANG_ANNOTATION] = gang
    return builder


def plan_with_gangs(
    nodes: list[NodeBuilder], pods: list[PodBuilder], upgrade: Any = SETTINGS
) -> Plan:
    """As the snapshot is taken in a window: pods of nodes waiting for admission are listed,
    and every node each gang runs on is known."""
    views = [n.view() for n in nodes]
    by_node: dict[str, list[Any]] = {}
    gang_nodes: dict[tuple[str, str], set[str]] = {}
    for builder in pods:
        view = builder.view(upgrade)
        by_node.setdefault(view.node or "", []).append(view)
        if view.gang and view.node:
            gang_nodes.setdefault((view.namespace, view.gang), set()).add(view.node)
    snapshot = UpgradeSnapshot(
        taken_at=NOW,
        nodes=views,
        pods={v.name: by_node.get(v.name, []) for v in views},
        gang_nodes={k: frozenset(v) for k, v in gang_nodes.items()},
    )
    return plan_pass(snapshot, upgrade, NOW)


def admitted(plan: Plan) -> list[str]:
    return [s.node.name for s in plan.steps if s.next_state == states.CORDON_REQUIRED]


def note(plan: Plan, name: str) -> str:
    return next(line.note for line in plan.pools[POOL].lines if line.name == name)


def waiting(name: str) -> NodeBuilder:
    return node(name).state(states.UPGRADE_REQUIRED)


def test_a_gangs_nodes_are_admitted_together_when_the_budget_allows() -> None:
    # max_unavailable 2: p-0 and p-3 run one gang; p-1 would come before p-3 in name order.
    nodes = [waiting("p-0"), waiting("p-1"), waiting("p-2"), waiting("p-3")]
    pods = [gang_member("g-0", "p-0"), gang_member("g-1", "p-3")]
    plan = plan_with_gangs(nodes, pods)
    assert admitted(plan) == ["p-0", "p-3"]
    steps = [s for s in plan.steps if s.admission]
    assert [s.admission.together for s in steps] == [("p-0", "p-3")] * 2
    assert [s.admission.pool_unavailable for s in steps] == [0, 1]
    assert "drained with p-3" in note(plan, "p-0")


def test_a_gang_larger_than_the_budget_waits_whole() -> None:
    # Three nodes of one gang, max_unavailable 2: none starts, the others go on in order.
    nodes = [waiting("p-0"), waiting("p-1"), waiting("p-2"), waiting("p-3")]
    pods = [gang_member("g-0", "p-0"), gang_member("g-1", "p-1"), gang_member("g-2", "p-2")]
    plan = plan_with_gangs(nodes, pods)
    assert admitted(plan) == ["p-3"]
    assert "3 nodes of one gang, drained together" in note(plan, "p-0")


def test_a_gang_that_also_runs_on_a_node_outside_the_rollout_keeps_the_node_waiting() -> None:
    # p-1 already runs the target (nothing to upgrade there): draining p-0 would stop the gang.
    nodes = [waiting("p-0"), node("p-1").driver(NEW), waiting("p-2")]
    pods = [gang_member("g-0", "p-0"), gang_member("g-1", "p-1")]
    plan = plan_with_gangs(nodes, pods)
    assert admitted(plan) == ["p-2"]
    why = note(plan, "p-0")
    assert "gang team/pg" in why and "node p-1" in why and f"already on driver {NEW}" in why
    assert any(b.startswith("node p-0: waiting") for b in plan.pools[POOL].blocks)


def test_a_gang_on_another_pools_node_keeps_the_node_waiting() -> None:
    nodes = [waiting("p-0"), node("q-0", pool="q")]
    pods = [gang_member("g-0", "p-0"), gang_member("g-1", "q-0")]
    plan = plan_with_gangs(nodes, pods)
    assert admitted(plan) == []
    assert "not in this pool's rollout" in note(plan, "p-0")


def test_gangs_chain_their_nodes_together() -> None:
    # Gang a on p-0 and p-1, gang b on p-1 and p-2: all three go together or not at all.
    nodes = [waiting("p-0"), waiting("p-1"), waiting("p-2")]
    pods = [
        gang_member("a-0", "p-0", "a"),
        gang_member("a-1", "p-1", "a"),
        gang_member("b-0", "p-1", "b"),
        gang_member("b-1", "p-2", "b"),
    ]
    assert admitted(plan_with_gangs(nodes, pods)) == []
    wide = settings(pools={POOL: PoolTarget(name=POOL, driver_version=NEW, max_unavailable=3)})
    assert admitted(plan_with_gangs(nodes, pods, wide)) == ["p-0", "p-1", "p-2"]


def test_a_gang_node_already_in_the_rollout_is_being_drained_anyway() -> None:
    nodes = [node("p-0").state(states.DRAIN_REQUIRED, since=NOW - 60).cordoned(), waiting("p-1")]
    pods = [gang_member("g-0", "p-0"), gang_member("g-1", "p-1")]
    plan = plan_with_gangs(nodes, pods)
    assert "p-1" in admitted(plan)
    (step,) = [s for s in plan.steps if s.admission]
    assert step.admission.together == ()


def test_a_gang_on_one_node_is_admitted_alone() -> None:
    nodes = [waiting("p-0"), waiting("p-1")]
    pods = [gang_member("g-0", "p-0"), gang_member("g-1", "p-0")]
    plan = plan_with_gangs(nodes, pods)
    assert admitted(plan) == ["p-0", "p-1"]
    assert all(s.admission.together == () for s in plan.steps if s.admission)


class ScriptedOpa:
    def __init__(self, deny: set[str]) -> None:
        self.deny = deny
        self.asked: list[str] = []

    def decide(self, name: str, input: dict[str, Any]) -> Decision:
        node_name = input["node"]["metadata"]["name"]
        self.asked.append(node_name)
        if node_name in self.deny:
            return Decision(allow=False, reasons=("not today",))
        return Decision(allow=True, reasons=("ok",))


def act_dry(plan: Plan, deny: set[str]) -> tuple[Any, ScriptedOpa, str]:
    opa = ScriptedOpa(deny)
    out = io.StringIO()
    kube: Any = object()
    rt = Runtime(
        kube=kube,
        opa=opa,  # type: ignore[arg-type]
        fleet=fleet(),
        settings=Settings(prometheus_url="http://unused", opa_url="http://unused", dry_run=True),
        now=NOW,
        summary=Summary(dry_run=True),
        events=EventRecorder(kube, dry_run=True),
        out=out,
    )
    return act_on_plan(rt, plan), opa, out.getvalue()


def test_one_refusal_keeps_every_node_of_the_gang_where_it_is() -> None:
    nodes = [waiting("p-0"), waiting("p-1"), waiting("p-2")]
    pods = [gang_member("g-0", "p-0"), gang_member("g-1", "p-1")]
    plan = plan_with_gangs(nodes, pods)
    assert admitted(plan) == ["p-0", "p-1"]
    report, opa, out = act_dry(plan, deny={"p-1"})
    assert opa.asked == ["p-0", "p-1"]  # both judged before either starts
    assert set(report.denied) == {"p-0", "p-1"}
    assert "none of p-0, p-1 (one gang's nodes) starts" in out
    assert "would set-state p-0" not in out and "would set-state p-1" not in out


def test_a_gang_allowed_whole_starts_whole() -> None:
    nodes = [waiting("p-0"), waiting("p-1")]
    pods = [gang_member("g-0", "p-0"), gang_member("g-1", "p-1")]
    report, _, out = act_dry(plan_with_gangs(nodes, pods), deny=set())
    assert report.denied == {}
    assert "would set-state p-0" in out and "would set-state p-1" in out


class ListingKube:
    """Answers the snapshot's lists: nodes, pods by node or namespace, no budgets."""

    def __init__(self, nodes: list[NodeBuilder], pods: list[PodBuilder]) -> None:
        self.nodes = [n.raw for n in nodes]
        self.pods = [p.raw for p in pods]
        self.paths: list[str] = []

    def list(self, path: str, params: dict[str, str] | None = None) -> list[dict[str, Any]]:
        self.paths.append(path + (f"?{params}" if params else ""))
        if path == "/api/v1/nodes":
            return self.nodes
        if path == "/api/v1/pods":
            name = (params or {})["fieldSelector"].split("=", 1)[1]
            return [p for p in self.pods if p["spec"].get("nodeName") == name]
        if path.startswith("/api/v1/namespaces/"):
            namespace = path.split("/")[4]
            return [p for p in self.pods if p["metadata"]["namespace"] == namespace]
        return []


def test_the_snapshot_knows_every_node_of_a_gang_on_a_node_waiting_for_admission() -> None:
    nodes = [waiting("p-0"), node("p-1").driver(NEW)]
    pods = [gang_member("g-0", "p-0"), gang_member("g-1", "p-1"), pod("other", "elsewhere")]
    kube = ListingKube(nodes, pods)
    snapshot = take_upgrade_snapshot(kube, settings(windows=(ALWAYS,)))  # type: ignore[arg-type]
    assert [p.name for p in snapshot.pods_on("p-0")] == ["g-0"]
    assert snapshot.gangs_on("p-0") == {("team", "pg"): frozenset({"p-0", "p-1"})}
    assert "/api/v1/namespaces/team/pods" in kube.paths
    assert not any("elsewhere" in path for path in kube.paths)


def test_outside_a_window_nodes_waiting_for_admission_are_not_listed() -> None:
    kube = ListingKube([waiting("p-0")], [gang_member("g-0", "p-0")])
    never = settings(windows=())
    snapshot = take_upgrade_snapshot(kube, never)  # type: ignore[arg-type]
    assert snapshot.pods == {} and snapshot.gang_nodes == {}
