"""Fixtures of the observability tests: the local stack's configuration, and the pinned tools."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from fleet.config import FleetConfig, load_stack_config
from localfleet.binaries import bin_dir, require_binaries

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def local_fleet() -> FleetConfig:
    return load_stack_config(ROOT / "stacks" / "Pulumi.local.yaml")


@pytest.fixture(scope="session")
def promtool() -> Path:
    return require_binaries(bin_dir(), ("promtool",))["promtool"]


@pytest.fixture(scope="session")
def fleet_prometheus(tmp_path_factory: pytest.TempPathFactory, local_fleet: FleetConfig) -> Any:
    """A real Prometheus holding two days of representative controller and DCGM series
    (backfilled by promtool), scraping a real Pushgateway that one controller summary was
    pushed to, and evaluating the rule set. Yields (prometheus, fleet data, pushgateway)."""
    from controller.summary import Summary
    from localfleet.servers import PrometheusServer, PushgatewayServer
    from observability.rules import write_rule_file
    from tests.observability.fleetdata import generate

    work = tmp_path_factory.mktemp("fleet-prometheus")
    data = generate()
    pushgateway = PushgatewayServer(work_dir=work / "pushgateway").start()
    prometheus = PrometheusServer(
        work_dir=work / "prometheus",
        rule_files=(write_rule_file(local_fleet, work / "rules.yaml"),),
        pushgateway=pushgateway.address,
        interval_seconds=1,
    )
    try:
        prometheus.start(data.samples, timeout=180)
        summary = Summary()
        summary.set("team_spend_usd", data.spend["research"], team="research")
        summary.set("team_budget_usd", 50000.0, team="research")
        summary.action("spend", "publish", "done")
        summary.finish(api_requests=3)
        summary.push(pushgateway.url)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if prometheus.query('fleetplane_controller_api_requests{job="fleetplane-controller"}'):
                break
            time.sleep(0.5)
        else:
            raise AssertionError("the pushed controller metrics were not scraped")
        yield prometheus, data, pushgateway
    finally:
        prometheus.stop()
        pushgateway.stop()
