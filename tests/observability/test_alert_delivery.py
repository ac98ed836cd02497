"""The budget alert end to end through real parts: a controller summary pushed to a real
Pushgateway, scraped by a real Prometheus evaluating the rule set, which sends the alert to a
real Alertmanager, which posts it to a webhook receiver (a small HTTP server in this test)."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.summary import Summary
from fleet.config import FleetConfig
from localfleet.servers import AlertmanagerServer, PrometheusServer, PushgatewayServer
from observability.rules import write_rule_file
from tests.alert_receiver import alert_receiver

pytestmark = pytest.mark.integration


@pytest.fixture
def receiver() -> Iterator[tuple[str, queue.Queue[dict[str, Any]]]]:
    """An Alertmanager webhook receiver: each notification's JSON body, in arrival order."""
    with alert_receiver() as found:
        yield found


def test_a_team_over_its_budget_warning_line_reaches_the_receiver(
    local_fleet: FleetConfig,
    receiver: tuple[str, queue.Queue[dict[str, Any]]],
    tmp_path: Path,
) -> None:
    url, received = receiver
    alertmanager = AlertmanagerServer(url, work_dir=tmp_path / "am", wait_seconds=1)
    pushgateway = PushgatewayServer(work_dir=tmp_path / "pg")
    prometheus = PrometheusServer(
        work_dir=tmp_path / "prom",
        rule_files=(write_rule_file(local_fleet, tmp_path / "rules.yaml"),),
        interval_seconds=1,
    )
    try:
        alertmanager.start()
        pushgateway.start()
        prometheus.pushgateway = pushgateway.address
        prometheus.alertmanager = alertmanager.address
        prometheus.start()
        # What the controller's spend concern records for a team at 86% of its budget, pushed
        # the way every pass pushes (counters read back first).
        summary = Summary()
        summary.set("team_spend_usd", 43000.0, team="research")
        summary.set("team_budget_usd", 50000.0, team="research")
        summary.set("team_spend_usd", 100.0, team="analytics")
        summary.set("team_budget_usd", 10000.0, team="analytics")
        summary.finish(api_requests=0)
        summary.push(pushgateway.url)

        deadline = time.monotonic() + 60
        alerts: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            try:
                notification = received.get(timeout=1)
            except queue.Empty:
                continue
            alerts += [
                a
                for a in notification["alerts"]
                if a["labels"]["alertname"].startswith("FleetplaneTeamBudget")
            ]
            if alerts:
                break
        assert alerts, (
            f"no budget alert reached the receiver; Prometheus holds {prometheus.alerts()}"
        )
        (alert,) = alerts
        assert alert["status"] == "firing"
        assert alert["labels"]["alertname"] == "FleetplaneTeamBudgetWarning"
        assert alert["labels"]["team"] == "research"
        assert alert["labels"]["severity"] == "warning"
        assert alert["annotations"]["summary"] == (
            "Team research has used 86% of its monthly GPU budget"
        )
    finally:
        for server in (prometheus, pushgateway, alertmanager):
            server.stop()
