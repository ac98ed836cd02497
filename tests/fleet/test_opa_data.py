"""The rendered OPA data document has the shape of docs/contracts.md for every stack."""

from __future__ import annotations

import json

import pytest

from fleet import labels
from fleet.config import FleetConfig
from fleet.render import cron_schedule, render_approvals, render_opa_data

TOP_LEVEL = {
    "namespaces",
    "teams",
    "models",
    "workload_types",
    "approval",
    "registries",
    "platform_repositories",
    "budget",
    "pools",
    "reserved_pools",
    "upgrade",
    "health",
    "lifetime",
    "gpu_operator",
    "system_namespaces",
    "platform",
    "controller",
}
TEAM_KEYS = {
    "namespaces",
    "monthly_budget_usd",
    "allowed_models",
    "default_model",
    "guaranteed",
    "quota",
    "budget_exempt_types",
}
MODEL_KEYS = {"resource", "node_label", "label_value", "price_per_hour_usd", "thermal"}
WORKLOAD_TYPE_KEYS = {
    "max_accelerators",
    "capacity",
    "priority_classes",
    "default_max_runtime_seconds",
    "checkpoint_required_on_spot",
    "budget_exempt",
    "preemptible",
    "min_runtime_seconds",
    "idle",
    "max_idle_timeout_seconds",
    "pod_security",
    "allow_required_pod_affinity",
}
IDLE_KEYS = {"util_threshold_percent", "window_seconds", "grace_seconds"}
POOL_KEYS = {"model", "capacity_type", "max_unavailable", "driver_version"}
CONTROLLER_KEYS = {
    "period_seconds",
    "preemption_pending_seconds",
    "prometheus_url",
    "opa_url",
    "dry_run",
    "lease_name",
}


@pytest.mark.parametrize("stack", ["local", "dev", "prod"])
def test_rendered_document_has_the_contract_shape(
    stack: str, stack_fleets: dict[str, FleetConfig]
) -> None:
    fleet = stack_fleets[stack]
    data = json.loads(json.dumps(render_opa_data(fleet)))  # JSON-serialisable as is

    assert set(data) == TOP_LEVEL
    resources = {m["resource"] for m in data["models"].values()}
    for ns, team in data["namespaces"].items():
        assert ns in data["teams"][team]["namespaces"]
    for name, team in data["teams"].items():
        assert set(team) >= TEAM_KEYS, name
        assert set(team["quota"]) == resources and set(team["guaranteed"]) == resources
        assert team["default_model"] in team["allowed_models"]
        assert set(team["allowed_models"]) <= set(data["models"])
    for name, model in data["models"].items():
        assert set(model) == MODEL_KEYS, name
        assert set(model["price_per_hour_usd"]) == {"on-demand", "spot"}
        assert model["node_label"] in (labels.GPU_PRODUCT, labels.TPU_ACCELERATOR)
    assert {"training", "inference", "notebook", "batch"} <= set(data["workload_types"])
    for name, wt in data["workload_types"].items():
        assert set(wt) == WORKLOAD_TYPE_KEYS, name
        assert wt["capacity"] in ("any", "spot", "on-demand")
        assert wt["priority_classes"], name
        assert wt["idle"] is None or set(wt["idle"]) == IDLE_KEYS
        assert wt["pod_security"] in ("baseline", "restricted")
    assert set(data["approval"]) == {"threshold_accelerators"}
    assert "default" not in data["system_namespaces"]
    assert {"kube-system", fleet.system_namespace, "monitoring"} <= set(data["system_namespaces"])
    assert not set(data["system_namespaces"]) & set(data["namespaces"])
    assert set(data["platform"]) == {
        "controller_service_account",
        "workload_controllers",
        "admin_groups",
    }
    assert data["platform"]["controller_service_account"] == (
        f"system:serviceaccount:{fleet.system_namespace}:fleetplane-controller"
    )
    for grant in render_approvals(fleet).values():
        # no uid: the controller's kept bindings are merged in at OPA's start, and a rendered
        # uid (even null) would conflict with them and keep OPA from starting
        assert set(grant) == {"team", "max_accelerators", "expires_at"}
        assert grant["team"] in data["teams"]
    assert all(r.endswith("/") for r in data["registries"])
    assert set(data["budget"]) == {"warn_ratio", "deny_ratio"}
    for name, pool in data["pools"].items():
        assert set(pool) >= POOL_KEYS, name
        assert pool["model"] in data["models"]
        assert pool["capacity_type"] in ("spot", "on-demand")
    for window in data["upgrade"]["maintenance_windows"]:
        assert set(window) == {"days", "start", "end"}
    assert set(data["controller"]) >= CONTROLLER_KEYS


def test_numbers_come_from_the_configuration_once(stack_fleets: dict[str, FleetConfig]) -> None:
    fleet = stack_fleets["local"]
    data = render_opa_data(fleet)
    research = fleet.team("research")
    assert data["teams"]["research"]["quota"] == {
        labels.GPU_RESOURCE: research.quota[labels.GPU_RESOURCE],
        labels.TPU_RESOURCE: research.quota[labels.TPU_RESOURCE],
    }
    assert data["teams"]["analytics"]["quota"][labels.TPU_RESOURCE] == 0  # absent means none
    assert data["models"]["h100-80gb"]["price_per_hour_usd"] == {"on-demand": 12.29, "spot": 3.93}
    assert data["workload_types"]["notebook"]["idle"]["window_seconds"] == 60  # stack override
    assert data["workload_types"]["notebook"]["max_idle_timeout_seconds"] == 14400  # built-in
    assert data["pools"]["a100-spot"] == {
        "cluster": "local",
        "model": "a100-40gb",
        "resource": labels.GPU_RESOURCE,
        "capacity_type": "spot",
        "machine_type": "p4d.24xlarge",
        "accelerators_per_node": 8,
        "allocatable_per_node": 8,
        "min_nodes": 8,
        "max_nodes": 8,
        "max_unavailable": "25%",
        "driver_manager": "gpu-operator",
        "driver_version": fleet.gpu_operator.driver_version,
        "teams": [],
    }
    assert data["pools"]["tpu-v5e"]["driver_version"] is None


def test_controller_section(stack_fleets: dict[str, FleetConfig]) -> None:
    local = render_opa_data(stack_fleets["local"])["controller"]
    assert local == {
        "period_seconds": 60,
        "schedule": "* * * * *",
        "preemption_pending_seconds": 20,  # the local stack's fast clock
        "scrape_interval_seconds": 5,
        "prometheus_url": "http://127.0.0.1:9090",
        "opa_url": "http://127.0.0.1:8181",
        "opa_ca_file": None,
        "opa_service": None,
        # the gate's token, as the CronJob mounts it (on the host: --opa-token-file)
        "opa_token_file": "/etc/fleetplane/opa-token/token",
        # the last spend, where the local fleet's OPA loads it at start
        "opa_data_configmap": "fleetplane-system/fleetplane-opa-controller-data",
        "dry_run": False,
        "lease_name": "fleetplane-controller",
        "namespace": "fleetplane-system",
        "image": None,
        "pushgateway_url": "http://127.0.0.1:9091",
    }
    prod = render_opa_data(stack_fleets["prod"])["controller"]
    # The in-cluster Pushgateway the components declare.
    assert prod["pushgateway_url"] == "http://fleetplane-pushgateway.fleetplane-system.svc:9091"
    assert prod["opa_url"] == "https://fleetplane-opa.fleetplane-system.svc:443"
    assert prod["opa_ca_file"] == "/etc/fleetplane/opa-ca/ca.crt"
    # The in-cluster OPA's replicas, each of which gets the spend document.
    assert prod["opa_service"] == "fleetplane-system/fleetplane-opa"
    assert render_opa_data(stack_fleets["dev"])["controller"]["dry_run"] is True


@pytest.mark.parametrize(
    ("period", "schedule"),
    [(60, "* * * * *"), (300, "*/5 * * * *"), (900, "*/15 * * * *"), (3600, "0 * * * *")],
)
def test_cron_schedule(period: int, schedule: str) -> None:
    assert cron_schedule(period) == schedule


def test_shared_pools_and_team_pools(stack_fleets: dict[str, FleetConfig]) -> None:
    data = render_opa_data(stack_fleets["prod"])
    assert data["pools"]["h100-spot"]["teams"] == ["research"]
    # The gate reads reservations from one place: every pool with teams, and no other.
    assert data["reserved_pools"] == {
        name: pool["teams"] for name, pool in data["pools"].items() if pool["teams"]
    }
    assert data["reserved_pools"]["h100-spot"] == ["research"]
    assert data["pools"]["l4-notebooks"]["allocatable_per_node"] == 4  # 1 L4 shared by 4
    assert data["pools"]["l4-notebooks"]["driver_manager"] == "cloud"
    assert data["pools"]["l4-notebooks"]["driver_version"] is None
    assert data["teams"]["serving"]["budget_exempt_types"] == ["inference"]
