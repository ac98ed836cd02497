"""The dashboards: built with Grafana's SDK, and every panel's query answered by a real
Prometheus holding representative data (backfilled, and pushed controller metrics)."""

from __future__ import annotations

from typing import Any

import pytest

from observability.dashboards import dashboards, panel_queries


def test_three_dashboards_with_unique_uids_and_a_prometheus_datasource() -> None:
    models = dashboards()
    assert sorted(models) == [
        "fleetplane-controller.json",
        "fleetplane-fleet.json",
        "fleetplane-teams.json",
    ]
    uids = {m["uid"] for m in models.values()}
    assert len(uids) == 3
    for model in models.values():
        variables = {v["name"]: v for v in model["templating"]["list"]}
        assert variables["datasource"]["query"] == "prometheus"
        for _, expr in panel_queries(model):
            assert "fleetplane:" not in expr, "dashboards read raw series (see module doc)"


def _concrete(expr: str) -> str:
    """What Grafana sends: its variables substituted (All teams, the dashboard's 2 days, and
    the interval Grafana picks for it on a wide panel)."""
    return expr.replace("$__range", "2d").replace("$__interval", "5m").replace("$team", ".+")


@pytest.mark.integration
@pytest.mark.parametrize(
    ("board", "title", "expr"),
    [
        (name, title, expr)
        for name, model in dashboards().items()
        for title, expr in panel_queries(model)
    ],
)
def test_every_panel_query_answers_with_data(
    fleet_prometheus: Any, board: str, title: str, expr: str
) -> None:
    prometheus, data, _ = fleet_prometheus
    found = prometheus.query(_concrete(expr), at=data.end)
    assert found, f"{board} / {title}: no data for {expr}"
    ranged = prometheus.query_range(_concrete(expr), data.end - 6 * 3600, data.end, 300)
    assert ranged, f"{board} / {title}: no data over the last 6 hours for {expr}"


@pytest.mark.integration
def test_the_pushed_metrics_are_what_the_panels_see_now(fleet_prometheus: Any) -> None:
    prometheus, data, _ = fleet_prometheus
    (spend,) = prometheus.query('max by (team) (fleetplane_team_spend_usd{team=~"research"})')
    assert float(spend["value"][1]) == data.spend["research"]
