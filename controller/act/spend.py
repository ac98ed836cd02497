"""Spend: keep each team's accumulator on its namespace, publish the month-to-date spend to OPA
(`data.fleetplane.spend`, read by the admission budget rule), and announce budget thresholds.

Order per pass: (1) write every team's accumulator (one annotation update each; a conflict
re-reads the namespace and folds again from the fresh accumulator), (2) publish all teams to OPA
in one document (to every ready replica of the in-cluster OPA Service, when there is one) and
keep the same document in the ConfigMap OPA loads at start (controller/act/opa_files.py), (3)
record an Event on the team namespace for each threshold crossed this month. The threshold is
remembered in the accumulator written in (1) before its Event is recorded, so an Event is
never repeated within a month.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from controller import annotations as own
from controller.act.events import ObjectRef
from controller.act.opa import SPEND_PATH
from controller.act.opa_documents import keep, publish
from controller.act.runtime import Runtime
from controller.act.writes import patch_fresh
from controller.decide.spend import Accumulator, PodCost, SpendPlan, TeamSpend, team_spend
from controller.errors import NotFoundError
from controller.observe.kube import namespace_path
from fleet.opa import SPEND_FILE_KEY

CONCERN = "spend"


def act_on_spend(rt: Runtime, plan: SpendPlan) -> dict[str, TeamSpend]:
    written: dict[str, TeamSpend] = {}
    to_record: list[tuple[str, TeamSpend, str]] = []
    for team, spend in sorted(plan.teams.items()):
        rt.summary.set("team_spend_usd", round(spend.usd, 2), team=team)
        rt.summary.set("team_budget_ratio", round(spend.ratio, 4), team=team)
        rt.summary.set("team_budget_usd", spend.budget_usd, team=team)
        if spend.dropped_by_cap:
            rt.log.warning("spend.accumulator.capped", team=team, dropped=spend.dropped_by_cap)
        written[team] = spend
        home = plan.home.get(team)
        if home is None:
            rt.log.warning(
                "spend.no-namespace", team=team, reason="none of the team's namespaces exists"
            )
        else:
            to_record.append((team, spend, home))

    def record(item: tuple[str, TeamSpend, str]) -> TeamSpend | None:
        team, spend, home = item
        return rt.guarded(
            CONCERN,
            "record",
            f"Namespace/{home}",
            partial(_record, rt, team, spend, home, plan.costs.get(team, [])),
        )

    for (team, _, _), recorded in zip(to_record, rt.each(to_record, record), strict=True):
        if recorded is not None:
            written[team] = recorded
    for team, spend in written.items():  # a conflict may have folded again
        rt.summary.set("team_spend_usd", round(spend.usd, 2), team=team)
        rt.summary.set("team_budget_ratio", round(spend.ratio, 4), team=team)
    document = {team: spend.opa_record(rt.now) for team, spend in written.items()}
    publish(rt, CONCERN, SPEND_PATH, document, _describe(written))
    # Also where OPA loads it at start: a replica that restarts before the next pass judges
    # budgets on it, not on no spend at all.
    keep(rt, CONCERN, SPEND_FILE_KEY, document, _describe(written))
    for team, spend in sorted(written.items()):
        home = plan.home.get(team)
        for threshold in spend.crossed:
            _announce(rt, team, spend, threshold, home)
    return written


def _describe(spends: dict[str, TeamSpend]) -> str:
    return ", ".join(
        f"{team} ${spend.usd:,.2f} ({spend.ratio:.0%} of ${spend.budget_usd:,.0f})"
        for team, spend in sorted(spends.items())
    )


def _record(rt: Runtime, team: str, spend: TeamSpend, home: str, costs: list[PodCost]) -> TeamSpend:
    """Write the accumulator; on a conflict fold again from the freshly read one."""
    outcome = {"spend": spend}

    def build(current: dict[str, Any] | None) -> dict[str, Any] | None:
        if current is not None:
            annotations = (current.get("metadata") or {}).get("annotations") or {}
            fresh = team_spend(
                team,
                costs,
                Accumulator.decode(annotations.get(own.SPEND)),
                budget_usd=spend.budget_usd,
                warn_ratio=rt.fleet.warn_ratio,
                deny_ratio=rt.fleet.deny_ratio,
                now=rt.now,
            )
            outcome["spend"] = fresh
        return {"metadata": {"annotations": {own.SPEND: outcome["spend"].accumulator.encode()}}}

    if rt.dry_run:
        rt.would(
            CONCERN,
            "record",
            f"Namespace/{home}",
            f"team {team}: ${spend.usd:,.2f} this month ({spend.folded_pods} deleted pods folded)",
        )
        return spend
    try:
        patch_fresh(rt.kube, namespace_path(home), _version(rt, home), build)
    except NotFoundError:
        rt.log.warning("spend.no-namespace", team=team, namespace=home)
        return spend
    final = outcome["spend"]
    rt.done(
        CONCERN,
        "record",
        f"Namespace/{home}",
        f"team {team}: ${final.usd:,.2f} this month",
        usd=round(final.usd, 2),
        folded_pods=final.folded_pods,
        tracked_pods=len(final.accumulator.pods),
    )
    return final


def _version(rt: Runtime, namespace: str) -> str | None:
    known = rt.namespaces.get(namespace)
    return known.resource_version if known else None


def _announce(rt: Runtime, team: str, spend: TeamSpend, threshold: str, home: str | None) -> None:
    ratio = rt.fleet.warn_ratio if threshold == "warn" else rt.fleet.deny_ratio
    consequence = (
        "new workloads are denied by admission (budget-exempt types excepted)"
        if threshold == "deny"
        else "admission warns on new workloads"
    )
    message = (
        f"Team {team} has spent ${spend.usd:,.2f} of its ${spend.budget_usd:,.2f} monthly budget "
        f"in {spend.month} ({spend.ratio:.0%}), past the {ratio:.0%} {threshold} line: {consequence}"
    )
    reason = "BudgetDenyThreshold" if threshold == "deny" else "BudgetWarnThreshold"
    if rt.dry_run or home is None:
        if rt.dry_run:
            rt.would(CONCERN, "announce", f"Namespace/{home}", message)
        return
    known = rt.namespaces.get(home)
    namespace = known.uid if known else ""
    rt.events.emit(
        ObjectRef(api_version="v1", kind="Namespace", namespace=home, name=home, uid=namespace),
        reason,
        message,
        warning=True,
    )
    rt.done(CONCERN, "announce", f"Namespace/{home}", message, threshold=threshold)
