"""The observability component: the Pushgateway the controller pushes to, the rule set as a
PrometheusRule and the dashboards as Grafana-sidecar ConfigMaps, all from the configuration."""

from __future__ import annotations

import json
from pathlib import Path

from components.observability import observability_manifests
from fleet.config import load_stack_config
from fleet.render import render_opa_data
from observability.dashboards import dashboards
from observability.rules import rule_groups

ROOT = Path(__file__).resolve().parents[2]


def _kinds(stack: str) -> dict[tuple[str, str], dict]:
    fleet = load_stack_config(ROOT / "stacks" / f"Pulumi.{stack}.yaml")
    return {(m["kind"], m["metadata"]["name"]): m for m in observability_manifests(fleet)}


def test_a_cloud_stack_ships_the_pushgateway_rules_and_dashboards() -> None:
    fleet = load_stack_config(ROOT / "stacks" / "Pulumi.prod.yaml")
    found = _kinds("prod")
    assert ("Deployment", "fleetplane-pushgateway") in found
    assert ("Service", "fleetplane-pushgateway") in found
    monitor = found[("ServiceMonitor", "fleetplane-pushgateway")]
    assert monitor["spec"]["endpoints"][0]["honorLabels"] is True
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    rule = found[("PrometheusRule", "fleetplane")]
    assert rule["spec"]["groups"] == rule_groups(fleet)
    boards = {name: m for (kind, name), m in found.items() if kind == "ConfigMap"}
    assert set(boards) == {n.removesuffix(".json") for n in dashboards()}
    for name, configmap in boards.items():
        assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert configmap["metadata"]["namespace"] == "monitoring"
        assert json.loads(configmap["data"][f"{name}.json"])["uid"] == name
    # the controller pushes to the Service declared here
    assert render_opa_data(fleet)["controller"]["pushgateway_url"] == (
        "http://fleetplane-pushgateway.fleetplane-system.svc:9091"
    )


def test_the_local_stack_declares_none_of_it_and_pushes_to_loopback() -> None:
    assert _kinds("local") == {}
    fleet = load_stack_config(ROOT / "stacks" / "Pulumi.local.yaml")
    assert render_opa_data(fleet)["controller"]["pushgateway_url"] == "http://127.0.0.1:9091"
