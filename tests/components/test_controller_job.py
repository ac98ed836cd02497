"""ControllerJob: the CronJob and least-privilege RBAC."""

from __future__ import annotations

import json

import pytest
from component_testkit import Declare

from components.config import FleetConfig
from components.controller_job import ControllerJob, ControllerJobArgs
from components.render import render_opa_data


def grants(rules: list[dict], group: str, resource: str) -> set[str]:
    return {
        verb
        for rule in rules
        if group in rule["apiGroups"] and resource in rule["resources"]
        for verb in rule["verbs"]
    }


@pytest.fixture
def prod_controller(declare: Declare, stack_fleets: dict[str, FleetConfig]):
    fleet = stack_fleets["prod"]
    return fleet, declare(lambda: ControllerJob("prod-controller", ControllerJobArgs(fleet=fleet)))


def test_cluster_role_is_least_privilege(prod_controller) -> None:
    _, declared = prod_controller
    (role,) = declared.kind("ClusterRole")
    rules = role["rules"]
    for rule in rules:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"]
        assert "*" not in rule["apiGroups"]
        assert "secrets" not in rule["resources"]
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"])
    # (group, resource) -> verbs, exactly
    want = {
        ("", "nodes"): {"get", "list", "watch", "patch"},
        ("", "pods"): {"get", "list", "watch", "create", "patch", "delete"},
        ("", "pods/eviction"): {"create"},
        ("", "namespaces"): {"get", "list", "watch", "patch"},
        ("policy", "poddisruptionbudgets"): {"get", "list", "watch"},
        ("bus.volcano.sh", "commands"): {"create"},
        ("", "events"): {"create", "patch"},
        ("events.k8s.io", "events"): {"create", "patch"},
        ("scheduling.k8s.io", "priorityclasses"): {"get", "list", "watch"},
        ("scheduling.volcano.sh", "podgroups"): {"get", "list", "watch"},
        ("scheduling.volcano.sh", "queues"): {"get", "list", "watch"},
        ("batch.volcano.sh", "jobs"): {"get", "list", "watch", "patch", "update"},
        ("apps", "deployments"): {"get", "list", "watch", "patch"},
        ("apps", "statefulsets"): {"get", "list", "watch", "patch"},
        ("apps", "replicasets"): {"get", "list", "watch"},
        ("batch", "jobs"): {"get", "list", "watch", "patch", "update"},
    }
    got = {
        (group, resource): grants(rules, group, resource)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert got == want


def test_namespaced_role_covers_only_the_lease_and_opa_endpoints(prod_controller) -> None:
    _, declared = prod_controller
    (role,) = declared.kind("Role")
    assert role["metadata"]["namespace"] == "fleetplane-system"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["fleetplane-controller", "fleetplane-controller-upgrade"],
            "verbs": ["get", "update", "patch"],
        },
        {
            "apiGroups": ["discovery.k8s.io"],
            "resources": ["endpointslices"],
            "verbs": ["get", "list"],
        },
    ]
    (binding,) = declared.kind("ClusterRoleBinding")
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": "fleetplane-controller",
            "namespace": "fleetplane-system",
        }
    ]


def test_cronjob(prod_controller) -> None:
    fleet, declared = prod_controller
    crons = {c["metadata"]["name"]: c for c in declared.kind("CronJob")}
    assert set(crons) == {"fleetplane-controller", "fleetplane-controller-upgrade"}
    upgrade = crons["fleetplane-controller-upgrade"]["spec"]["jobTemplate"]["spec"]["template"]
    assert upgrade["spec"]["containers"][0]["command"] == [
        "python",
        "-m",
        "controller",
        "upgrade",
        "run",
    ]
    assert crons["fleetplane-controller-upgrade"]["spec"]["concurrencyPolicy"] == "Forbid"
    cron = crons["fleetplane-controller"]
    spec = cron["spec"]
    assert spec["schedule"] == "*/5 * * * *"
    assert spec["concurrencyPolicy"] == "Forbid"
    assert spec["suspend"] is False
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["python", "-m", "controller", "reconcile"]
    assert container["image"] == fleet.controller.image
    assert {
        "name": "FLEETPLANE_CONFIG",
        "value": "/etc/fleetplane/config/config.json",
    } in container["env"]
    assert pod["serviceAccountName"] == "fleetplane-controller"
    assert pod["restartPolicy"] == "Never"
    (config,) = [
        c
        for c in declared.kind("ConfigMap")
        if c["metadata"]["name"] == "fleetplane-controller-config"
    ]
    assert json.loads(config["data"]["config.json"]) == json.loads(
        json.dumps(render_opa_data(fleet))
    )
    assert all("ControllerJob$kubernetes:" in u for u in declared.urns if "kubernetes:" in u)


def test_local_cronjob_is_suspended(declare: Declare, stack_fleets: dict[str, FleetConfig]) -> None:
    fleet = stack_fleets["local"]
    declared = declare(lambda: ControllerJob("local-controller", ControllerJobArgs(fleet=fleet)))
    crons = declared.kind("CronJob")
    assert len(crons) == 2
    assert all(c["spec"]["suspend"] is True and c["spec"]["schedule"] == "* * * * *" for c in crons)
    (role,) = declared.kind("Role")
    assert all(r["apiGroups"] != ["discovery.k8s.io"] for r in role["rules"])  # no in-cluster OPA
