"""TeamTenancy and WorkloadClasses: namespaces, quotas per team, defaults, RBAC, priorities."""

from __future__ import annotations

import pytest

from components.tenancy import TeamTenancy, TeamTenancyArgs, WorkloadClasses, WorkloadClassesArgs
from fleet.config import FleetConfig
from tests.components.component_testkit import Declare

QUOTA = "kubernetes:core/v1:ResourceQuota"


@pytest.mark.parametrize(
    ("stack", "team", "hard"),
    [
        ("local", "research", {"nvidia.com/gpu": "64", "google.com/tpu": "16"}),
        ("local", "serving", {"nvidia.com/gpu": "48", "google.com/tpu": "0"}),
        ("local", "analytics", {"nvidia.com/gpu": "16", "google.com/tpu": "0"}),
        ("dev", "serving", {"nvidia.com/gpu": "16"}),
        ("prod", "research", {"nvidia.com/gpu": "160", "google.com/tpu": "48"}),
    ],
)
def test_one_quota_per_accelerator_resource_per_namespace(
    stack: str,
    team: str,
    hard: dict[str, str],
    declare: Declare,
    stack_fleets: dict[str, FleetConfig],
) -> None:
    fleet = stack_fleets[stack]
    config = fleet.team(team)
    declared = declare(
        lambda: TeamTenancy(f"{stack}-{team}", TeamTenancyArgs(fleet=fleet, team=config))
    )
    for ns in config.effective_namespaces:
        quotas = [
            q.inputs for q in declared.of_type(QUOTA) if q.inputs["metadata"]["namespace"] == ns
        ]
        got = {}
        for q in quotas:
            ((key, value),) = q["spec"]["hard"].items()
            got[key.removeprefix("requests.")] = value
            assert q["metadata"]["name"] == "accelerators-" + key.removeprefix("requests.").replace(
                ".", "-"
            ).replace("/", "-")
        assert got == hard


def test_team_namespace_is_labelled_annotated_and_bound(
    declare: Declare, stack_fleets: dict[str, FleetConfig]
) -> None:
    fleet = stack_fleets["dev"]
    team = fleet.team("serving")
    declared = declare(lambda: TeamTenancy("dev-serving", TeamTenancyArgs(fleet=fleet, team=team)))
    namespaces = {n["metadata"]["name"]: n["metadata"] for n in declared.kind("Namespace")}
    assert set(namespaces) == {"serving", "serving-canary"}
    for meta in namespaces.values():
        assert meta["labels"]["fleetplane.dev/team"] == "serving"
        assert meta["annotations"] == {"scheduling.volcano.sh/queue-name": "serving"}
    bindings = declared.kind("RoleBinding")
    assert {b["metadata"]["namespace"] for b in bindings} == {"serving", "serving-canary"}
    for binding in bindings:
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "edit",
        }
        assert binding["subjects"] == [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "serving-oncall"}
        ]
    (limits,) = [
        lr for lr in declared.kind("LimitRange") if lr["metadata"]["namespace"] == "serving"
    ]
    assert limits["spec"]["limits"] == [
        {
            "type": "Container",
            "defaultRequest": {"cpu": "250m", "memory": "512Mi"},
            "default": {"cpu": "4", "memory": "16Gi"},
        }
    ]
    # children are parented to the component
    assert all("TeamTenancy$kubernetes:" in u for u in declared.urns if "kubernetes:" in u)


def test_priority_classes_are_declared_once_per_cluster(
    declare: Declare, stack_fleets: dict[str, FleetConfig]
) -> None:
    fleet = stack_fleets["local"]
    declared = declare(lambda: WorkloadClasses("local-classes", WorkloadClassesArgs(fleet=fleet)))
    classes = {pc["metadata"]["name"]: pc for pc in declared.kind("PriorityClass")}
    assert {n: pc["value"] for n, pc in classes.items()} == {
        "fleetplane-training": 1000,
        "fleetplane-training-high": 5000,
        "fleetplane-inference": 10000,
        "fleetplane-notebook": 500,
        "fleetplane-batch": 100,
    }
    assert classes["fleetplane-batch"]["preemptionPolicy"] == "Never"
    assert all(pc["globalDefault"] is False for pc in classes.values())
    assert (
        classes["fleetplane-inference"]["metadata"]["labels"]["fleetplane.dev/workload-type"]
        == "inference"
    )
    tenancy = declare(
        lambda: TeamTenancy(
            "local-research", TeamTenancyArgs(fleet=fleet, team=fleet.team("research"))
        )
    )
    assert not tenancy.kind("PriorityClass")
