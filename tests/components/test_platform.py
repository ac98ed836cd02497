"""The Platform and the program entry: every stack declares exactly the manifests, every
resource belongs to a component, and an invalid fleet stops before anything is declared."""

from __future__ import annotations

import json
import runpy
from collections import Counter
from typing import Any

import pulumi
import pytest
import yaml

from components.platform import Platform, PlatformArgs, cluster_kubeconfig, render_manifests
from components.tls import TlsMaterial
from components.tokens import TokenMaterial
from fleet.config import FleetConfig
from tests.components.component_testkit import (
    FAKE_TLS,
    FAKE_TOKEN,
    REPO_ROOT,
    Declare,
    minimal_raw_fleet,
)


def canonical(manifest: dict[str, Any]) -> str:
    return json.dumps(manifest, sort_keys=True)


@pytest.mark.parametrize("stack", ["local", "dev", "prod"])
def test_platform_declares_exactly_the_rendered_manifests(
    stack: str, declare: Declare, stack_fleets: dict[str, FleetConfig]
) -> None:
    fleet = stack_fleets[stack]
    declared = declare(lambda: Platform(stack, PlatformArgs(fleet=fleet)))

    want = render_manifests(
        fleet, tls=TlsMaterial(**FAKE_TLS), controller_token=TokenMaterial(**FAKE_TOKEN)
    )
    got = declared.kubernetes_objects()
    got = [o for o in got if "kind" in o]  # providers have no kind
    assert Counter(map(canonical, got)) == Counter(map(canonical, json.loads(json.dumps(want))))

    # every resource is a descendant of the Platform component
    for urn in declared.urns:
        chain = urn.split("::")[2]
        assert chain.startswith(("pulumi:pulumi:Stack$fleetplane:index:Platform", "fleetplane:")), (
            urn
        )


@pytest.mark.parametrize(
    ("stack", "pools", "releases"),
    [
        ("local", [], 0),
        ("dev", ["aws:eks/nodeGroup:NodeGroup"] * 4, 2),
        ("prod", ["gcp:container/nodePool:NodePool"] * 5, 2),
    ],
)
def test_cloud_resources_per_stack(
    stack: str,
    pools: list[str],
    releases: int,
    declare: Declare,
    stack_fleets: dict[str, FleetConfig],
) -> None:
    fleet = stack_fleets[stack]
    declared = declare(lambda: Platform(stack, PlatformArgs(fleet=fleet)))
    cloud = [r.typ for r in declared.registrations if r.typ.split(":")[0] in ("aws", "gcp")]
    assert cloud == pools
    assert len(declared.of_type("kubernetes:helm.sh/v3:Release")) == releases
    provider = declared.one("pulumi:providers:kubernetes").inputs
    if stack == "local":
        assert provider["kubeconfig"] == str(REPO_ROOT / ".fleet" / "local" / "kubeconfig")
    else:
        assert "kubeconfig" not in provider


def test_kubeconfig_resolution(stack_fleets: dict[str, FleetConfig]) -> None:
    local = stack_fleets["local"].clusters[0]
    prod = stack_fleets["prod"].clusters[0]
    assert cluster_kubeconfig(local, None) == str(REPO_ROOT / ".fleet/local/kubeconfig")
    assert cluster_kubeconfig(local, "/tmp/kc") == "/tmp/kc"
    assert cluster_kubeconfig(prod, None) is None
    assert cluster_kubeconfig(prod, "kc/prod") == str(REPO_ROOT / "kc/prod")


def run_entry(declare: Declare, config: dict[str, str]):
    def program() -> None:
        pulumi.runtime.set_all_config(config)
        runpy.run_path(str(REPO_ROOT / "stacks" / "__main__.py"), run_name="__main__")

    return declare(program)


def test_program_entry_declares_the_local_stack(declare: Declare) -> None:
    stack_file = yaml.safe_load((REPO_ROOT / "stacks" / "Pulumi.local.yaml").read_text())
    config = {
        k: v if isinstance(v, str) else json.dumps(v) for k, v in stack_file["config"].items()
    }
    declared = run_entry(declare, config)
    assert declared.one("fleetplane:index:Platform").name == "test"
    assert len(declared.of_type("fleetplane:tenancy:TeamTenancy")) == 3


def test_invalid_fleet_stops_the_program_before_any_resource(declare: Declare) -> None:
    raw = minimal_raw_fleet()
    raw["clusters"][0]["pools"][0]["model"] = "b300"
    raw["teams"][0]["quota"]["nvidia.com/gpu"] = 999
    with pytest.raises(Exception) as caught:
        run_entry(declare, {"fleetplane:fleet": json.dumps(raw)})
    message = str(caught.value)
    assert "clusters[gke].pools[h100].model: unknown accelerator model 'b300'" in message
    assert "teams[research].quota[nvidia.com/gpu]" in message
    assert caught.type.__name__ == "RunError"
