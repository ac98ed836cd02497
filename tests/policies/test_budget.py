"""The budget rule through a real OPA server: month-to-date spend pushed to
data.fleetplane.spend plus the workload's estimate against the team's monthly budget."""

from __future__ import annotations

from typing import Any

import pytest

from tests.policies.builders import cpu, inference, notebook, training
from tests.policies.conftest import Gate, current_month

pytestmark = pytest.mark.integration

# 8 H100 on demand for the training default of 24 hours and the pods' termination grace
# (Kubernetes' default 30 s; issue 33 prices it): 8 x 12.29 x (86400 + 30) / 3600.
GRACE_HOURS = 30 / 3600
EIGHT_H100_DAY = 8 * 12.29 * (24 + GRACE_HOURS)


def test_under_the_warning_line_is_silent(gate: Gate, spend: Any) -> None:
    spend(research=30_000)
    verdict = gate.review(training())
    assert verdict.allowed
    assert verdict.warnings == []


def test_over_the_warning_line_is_admitted_with_a_warning(gate: Gate, spend: Any) -> None:
    spend(research=38_000)
    verdict = gate.review(training())
    assert verdict.allowed
    assert verdict.warnings == [
        "budget: team research would reach 81% of its monthly budget ($38000 spent this month + "
        "$2360 estimated for this workload, budget $50000), over the 80% warning line"
    ]


def test_over_the_budget_is_denied(gate: Gate, spend: Any) -> None:
    spend(research=48_000)
    verdict = gate.review(training())
    assert verdict.rules == {"budget"}
    assert verdict.says("would reach 101% of its monthly budget")
    assert verdict.says("lower the devices, replicas or activeDeadlineSeconds")


def test_a_shorter_deadline_brings_the_estimate_under_the_budget(gate: Gate, spend: Any) -> None:
    spend(research=48_000)
    assert gate.review(training().as_job(activeDeadlineSeconds=3600)).allowed


def test_budget_exempt_inference_of_a_team_not_listing_it_is_denied(gate: Gate, spend: Any) -> None:
    """Issue 19: inference is budget_exempt, but team serving does not list it in
    budget_exempt_types, so its inference stops at the budget like any other type."""
    spend(serving=29_999)
    verdict = gate.review(inference().as_deployment(replicas=2).in_namespace("ml-serving"))
    assert verdict.rules == {"budget"}


def test_team_listing_a_type_that_is_not_budget_exempt_is_denied(gate: Gate, spend: Any) -> None:
    """Issue 19: analytics lists notebook, but notebook is not budget_exempt (a list the
    configuration model refuses), so the list exempts nothing."""
    spend(analytics=6_000)
    verdict = gate.review(notebook().in_namespace("analytics"))
    assert verdict.rules == {"budget"}


def test_other_types_of_that_team_are_denied(gate: Gate, spend: Any) -> None:
    spend(analytics=6_000)
    verdict = gate.review(training().model("a100-40gb").in_namespace("analytics"))
    assert verdict.rules == {"budget"}


def test_spend_of_another_month_counts_as_zero(gate: Gate, spend: Any) -> None:
    spend(month="1999-01", research=10**9)
    assert gate.review(training()).allowed


def test_malformed_spend_fails_closed(gate: Gate, spend: Any) -> None:
    spend(research="a lot")
    verdict = gate.review(training())
    assert verdict.rules == {"budget"}
    assert verdict.says("data.fleetplane.spend.research must be")
    gate.server.put_data("fleetplane/spend", {"research": {"usd": 1}})
    assert gate.review(training()).rules == {"budget"}


def test_pods_without_accelerators_are_not_priced(gate: Gate, spend: Any) -> None:
    spend(research=10**9)
    assert gate.review(cpu()).allowed


def test_estimate_is_devices_times_price_times_runtime(gate: Gate) -> None:
    estimate = gate.server.query("fleetplane/admission/estimate_usd", training().review())
    assert estimate == pytest.approx(EIGHT_H100_DAY)
    spot = gate.server.query(
        "fleetplane/admission/estimate_usd", training().on_spot().checkpoint().review()
    )
    assert spot == pytest.approx(8 * 3.93 * (24 + GRACE_HOURS))


def test_current_month_matches_opa_clock(gate: Gate) -> None:
    assert gate.server.query("fleetplane/budget/month_now") == current_month()
