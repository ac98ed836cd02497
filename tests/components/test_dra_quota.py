"""The team quota over claimed GPUs (issue 30 item 5, components/dra_quota.py): declared under
Pulumi's mocks for a team of one namespace (and not for a team of two), and enforced by the
pinned API server: claims of gpu.nvidia.com devices beyond the team's quota are refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.dra_quota import dra_quota, dra_quota_key
from components.tenancy import TeamTenancy, TeamTenancyArgs
from fleet.config import FleetConfig
from localfleet.controlplane import LocalCluster
from tests.components.component_testkit import Declare

KEY = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"


def test_a_team_of_one_namespace_has_its_gpu_quota_over_claims(
    declare: Declare, stack_fleets: dict[str, FleetConfig]
) -> None:
    fleet = stack_fleets["local"]
    team = fleet.team("analytics")
    assert team.effective_namespaces == ["analytics"]
    declared = declare(
        lambda: TeamTenancy("local-analytics", TeamTenancyArgs(fleet=fleet, team=team))
    )
    (quota,) = declared.kind("ResourceQuota")
    assert quota["metadata"]["namespace"] == "analytics"
    assert quota["spec"]["hard"] == {KEY: str(team.quota["nvidia.com/gpu"])}
    assert dra_quota_key("gpu.nvidia.com") == KEY


def test_a_team_of_two_namespaces_gets_no_claim_quota(stack_fleets: dict[str, FleetConfig]) -> None:
    team = stack_fleets["dev"].team("serving")
    assert len(team.effective_namespaces) == 2
    assert dra_quota(team, "serving", {}) == []


def _claim(name: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpus",
                        "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count},
                    }
                ]
            }
        },
    }


@pytest.mark.integration
def test_the_api_server_refuses_claims_beyond_the_quota(
    kube: LocalCluster, namespace: str, stack_fleets: dict[str, FleetConfig]
) -> None:
    team = stack_fleets["local"].team("analytics")  # 16 GPUs
    (quota,) = dra_quota(team, namespace, {"fleetplane.dev/team": team.name})
    kube.apply([quota])

    def create(obj: dict[str, Any]) -> Any:
        return kube.kubectl(
            "create", "-n", namespace, "-f", "-", input=json.dumps(obj), check=False
        )

    assert create(_claim("first", 8)).returncode == 0
    assert create(_claim("second", 8)).returncode == 0
    refused = create(_claim("third", 1))
    assert refused.returncode != 0
    assert "exceeded quota" in refused.stderr and KEY in refused.stderr
