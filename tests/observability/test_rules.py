"""The rule set: valid for Prometheus, every rule unit-tested by `promtool test rules`, and the
same groups in the PrometheusRule and in the local fleet's rule file."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from fleet.config import FleetConfig
from fleet.xids import XID_RULES, actionable_xids
from observability.rules import (
    alert_names,
    record_names,
    render,
    rule_groups,
    write_rule_file,
)

HERE = Path(__file__).resolve().parent
UNIT_TESTS = HERE / "rules_test.yaml"


@pytest.mark.integration
def test_every_rule_passes_its_promtool_unit_test(
    local_fleet: FleetConfig, promtool: Path, tmp_path: Path
) -> None:
    write_rule_file(local_fleet, tmp_path / "rules.yaml")
    shutil.copy(UNIT_TESTS, tmp_path / "rules_test.yaml")
    checked = subprocess.run(
        [str(promtool), "check", "rules", "rules.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [str(promtool), "test", "rules", "rules_test.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_rule_has_a_unit_test(local_fleet: FleetConfig) -> None:
    tests = yaml.safe_load(UNIT_TESTS.read_text())["tests"]
    alerts = {a["alertname"] for t in tests for a in t.get("alert_rule_test", [])}
    fired = {
        a["alertname"] for t in tests for a in t.get("alert_rule_test", []) if a.get("exp_alerts")
    }
    expressions = " ".join(e["expr"] for t in tests for e in t.get("promql_expr_test", []))
    assert set(alert_names(local_fleet)) == alerts
    assert set(alert_names(local_fleet)) == fired, "each alert is seen firing in a test"
    assert all(name in expressions for name in record_names(local_fleet))


def test_the_thresholds_come_from_the_configuration(local_fleet: FleetConfig) -> None:
    changed = local_fleet.model_copy(
        update={
            "observability": local_fleet.observability.model_copy(
                update={"hot_gpu_celsius": 78.5, "idle_gpus_alert": 3}
            )
        }
    )
    text = render(changed)
    assert "DCGM_FI_DEV_GPU_TEMP) > 78.5" in text
    assert "fleetplane:team_gpus_idle:sum >= 3" in text
    assert "[[" not in text


def test_the_xid_alert_pages_for_exactly_the_xids_the_table_acts_on(
    local_fleet: FleetConfig,
) -> None:
    """One table (fleet/xids.py) for the remediation and the page: the alert's matcher is
    generated from it, so an Xid the table leaves to the application cannot page."""
    (alert,) = [
        rule
        for group in rule_groups(local_fleet)
        for rule in group["rules"]
        if rule.get("alert") == "FleetplaneGpuXidError"
    ]
    matcher = re.fullmatch(
        r'fleetplane:gpu_last_xid:count_values\{xid=~"([0-9|]+)"\}', alert["expr"]
    )
    assert matcher, alert["expr"]
    paged = [int(xid) for xid in matcher.group(1).split("|")]
    assert paged == list(actionable_xids())
    assert {xid for xid, rule in XID_RULES.items() if rule.remedy} == set(paged)
    assert not {13, 31, 43, 45} & set(paged)
    assert 79 in paged
