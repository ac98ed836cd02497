"""Spend accounting's step: each team's accumulator from its home namespace, month-to-date
spend decided on the snapshot (decide.spend), kept and published (act.spend)."""

from __future__ import annotations

from controller import annotations as own
from controller.act.spend import act_on_spend
from controller.concerns import PassView
from controller.decide.spend import Accumulator, plan_spend


def run(view: PassView) -> None:
    rt, snapshot = view.rt, view.snapshot
    accumulators: dict[str, Accumulator | None] = {}
    for name, team in rt.fleet.teams.items():
        home = next((ns for ns in team.namespaces if ns in snapshot.namespaces), None)
        accumulators[name] = (
            Accumulator.decode(snapshot.namespaces[home].annotations.get(own.SPEND))
            if home
            else None
        )
    plan = plan_spend(
        snapshot.pods, snapshot.nodes, snapshot.namespaces, rt.fleet, accumulators, rt.now
    )
    act_on_spend(rt, plan)
