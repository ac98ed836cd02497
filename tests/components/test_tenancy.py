"""TeamTenancy and WorkloadClasses: namespaces, one team-wide quota, defaults, RBAC, priorities."""

from __future__ import annotations

from components.tenancy import TeamTenancy, TeamTenancyArgs, WorkloadClasses, WorkloadClassesArgs
from fleet.config import FleetConfig
from tests.components.component_testkit import Declare

QUOTA = "kubernetes:core/v1:ResourceQuota"


def test_a_team_of_two_namespaces_has_one_limit_not_two(
    declare: Declare, stack_fleets: dict[str, FleetConfig]
) -> None:
    """dev's serving team has two namespaces: no per-namespace ResourceQuota (each would hold
    the team's whole quota again); its queue's capability is the one team-wide limit."""
    from components.volcano import volcano_queues

    fleet = stack_fleets["dev"]
    team = fleet.team("serving")
    assert len(team.effective_namespaces) == 2
    declared = declare(lambda: TeamTenancy("dev-serving", TeamTenancyArgs(fleet=fleet, team=team)))
    assert not declared.of_type(QUOTA)
    (queue,) = [q for q in volcano_queues(fleet) if q["metadata"]["name"] == "serving"]
    assert queue["spec"]["capability"]["nvidia.com/gpu"] == str(team.quota["nvidia.com/gpu"])


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
    bindings = [b for b in declared.kind("RoleBinding") if b["metadata"]["name"] == "team-members"]
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


def test_a_teams_service_accounts_may_patch_pods_in_their_namespace_only(
    declare: Declare, stack_fleets: dict[str, FleetConfig]
) -> None:
    """What `fleetplane checkpoint` needs and no more: `patch` on pods, in each of the team's
    namespaces, bound to that namespace's ServiceAccounts (not another's, not the team's
    people, who have `edit`)."""
    fleet = stack_fleets["dev"]
    team = fleet.team("serving")
    declared = declare(lambda: TeamTenancy("dev-serving", TeamTenancyArgs(fleet=fleet, team=team)))
    roles = declared.kind("Role")
    assert {r["metadata"]["namespace"] for r in roles} == {"serving", "serving-canary"}
    for role in roles:
        assert role["metadata"]["name"] == "fleetplane-checkpoint"
        assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}]
    bindings = [
        b for b in declared.kind("RoleBinding") if b["metadata"]["name"] == "fleetplane-checkpoint"
    ]
    assert len(bindings) == 2
    for binding in bindings:
        ns = binding["metadata"]["namespace"]
        assert binding["roleRef"]["kind"] == "Role"
        assert binding["subjects"] == [
            {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Group",
                "name": f"system:serviceaccounts:{ns}",
            }
        ]
