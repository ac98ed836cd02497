"""GpuOperator and Volcano: pinned releases, their values, and the team queues."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from components.gpu_operator import DCGM_METRICS_CONFIG, GpuOperator, GpuOperatorArgs
from components.volcano import Volcano, VolcanoArgs
from fleet.config import FleetConfig
from fleet.dcgm import FIELDS, enabled_fields
from tests.components.component_testkit import Declare

RELEASE = "kubernetes:helm.sh/v3:Release"
QUEUE = "kubernetes:scheduling.volcano.sh/v1beta1:Queue"


def test_gpu_operator_release_is_pinned_and_never_upgrades_drivers_itself(
    declare: Declare, stack_fleets: dict[str, FleetConfig]
) -> None:
    fleet = stack_fleets["prod"]
    declared = declare(
        lambda: GpuOperator(
            "prod-gpu-operator", GpuOperatorArgs(fleet=fleet, cluster=fleet.clusters[0])
        )
    )
    release = declared.one(RELEASE).inputs
    assert release["chart"] == "gpu-operator"
    assert release["version"] == fleet.gpu_operator.chart_version == "v25.3.0"
    assert release["repositoryOpts"] == {"repo": "https://helm.ngc.nvidia.com/nvidia"}
    assert release["namespace"] == "gpu-operator" and release["createNamespace"] is True
    values = release["values"]
    assert values["driver"] == {
        "enabled": True,
        "version": "570.124.06",
        "upgradePolicy": {"autoUpgrade": False},
    }
    assert values["dcgmExporter"]["enabled"] is True
    assert values["dcgmExporter"]["serviceMonitor"]["enabled"] is True
    assert values["dcgmExporter"]["serviceMonitor"]["interval"] == "15s"
    assert values["mig"] == {"strategy": "single"}
    # operator daemonsets tolerate the spot taint too
    keys = {t["key"] for t in values["daemonsets"]["tolerations"]}
    assert keys == {"nvidia.com/gpu", "fleetplane.dev/capacity-type"}
    assert any("GpuOperator$kubernetes:helm.sh/v3:Release" in u for u in declared.urns)


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_gpu_operator_ships_the_fleet_s_dcgm_counters_file(
    declare: Declare, stack_fleets: dict[str, FleetConfig], stack: str
) -> None:
    """The exporter's counters come from the fleet's list (fleet/dcgm.py), in the ConfigMap the
    chart creates and the ClusterPolicy names: `dcgm-metrics.csv`, dcgm-exporter's CSV."""
    fleet = stack_fleets[stack]
    declared = declare(
        lambda: GpuOperator(
            f"{stack}-gpu-operator", GpuOperatorArgs(fleet=fleet, cluster=fleet.clusters[0])
        )
    )
    config = declared.one(RELEASE).inputs["values"]["dcgmExporter"]["config"]
    assert config["name"] == DCGM_METRICS_CONFIG and config["create"] is True
    assert enabled_fields(config["data"]) == {f.name: f for f in FIELDS}
    # the error counters dcgm-exporter's default files leave off are on
    assert {
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        "DCGM_FI_DEV_XID_ERRORS",
    } <= set(enabled_fields(config["data"]))


def test_gpu_operator_gives_containers_only_the_devices_the_plugin_granted(
    declare: Declare, stack_fleets: dict[str, FleetConfig]
) -> None:
    """Issue 33: a container without a request (sidecar, init, ephemeral) must not reach the
    node's GPUs through its image's NVIDIA_VISIBLE_DEVICES: the runtime ignores the variable
    in unprivileged containers and reads the device plugin's volume mounts instead."""
    fleet = stack_fleets["prod"]
    declared = declare(
        lambda: GpuOperator(
            "prod-gpu-operator", GpuOperatorArgs(fleet=fleet, cluster=fleet.clusters[0])
        )
    )
    values = declared.one(RELEASE).inputs["values"]
    toolkit = {e["name"]: e["value"] for e in values["toolkit"]["env"]}
    assert toolkit == {
        "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED": "false",
        "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS": "true",
    }
    assert values["toolkit"]["enabled"] is True
    plugin = {e["name"]: e["value"] for e in values["devicePlugin"]["env"]}
    assert plugin == {"DEVICE_LIST_STRATEGY": "volume-mounts"}


def test_gpu_operator_time_slicing_config_per_sharing_pool(
    declare: Declare, stack_fleets: dict[str, FleetConfig]
) -> None:
    fleet = stack_fleets["dev"]
    declared = declare(
        lambda: GpuOperator(
            "dev-gpu-operator", GpuOperatorArgs(fleet=fleet, cluster=fleet.clusters[0])
        )
    )
    plugin = declared.one(RELEASE).inputs["values"]["devicePlugin"]["config"]
    assert plugin["create"] is True and plugin["default"] == "default"
    assert set(plugin["data"]) == {"default", "l4-shared"}
    shared = yaml.safe_load(plugin["data"]["l4-shared"])
    assert shared["sharing"]["timeSlicing"]["resources"] == [
        {"name": "nvidia.com/gpu", "replicas": 4}
    ]
    # EKS NVIDIA AMI ships the driver everywhere in dev: the operator installs none.
    assert declared.one(RELEASE).inputs["values"]["driver"]["enabled"] is False


def test_gpu_operator_is_skipped_offline_with_a_message(
    declare: Declare, stack_fleets: dict[str, FleetConfig]
) -> None:
    fleet = stack_fleets["local"]
    declared = declare(
        lambda: GpuOperator(
            "local-gpu-operator", GpuOperatorArgs(fleet=fleet, cluster=fleet.clusters[0])
        )
    )
    assert not declared.of_type(RELEASE)
    assert any(
        "GPU Operator not installed" in m and "helm_charts is off" in m for m in declared.logs
    )


def volcano_release(declare: Declare, fleet: FleetConfig) -> tuple[dict[str, Any], Any]:
    """The Volcano Helm release's inputs, and its scheduler configuration parsed."""
    declared = declare(
        lambda: Volcano("prod-volcano", VolcanoArgs(fleet=fleet, cluster=fleet.clusters[0]))
    )
    release = declared.one(RELEASE).inputs
    return release, yaml.safe_load(release["values"]["custom"]["scheduler_config_override"])


def test_volcano_release_configures_the_scheduler(
    declare: Declare, stack_fleets: dict[str, FleetConfig]
) -> None:
    release, conf = volcano_release(declare, stack_fleets["prod"])
    assert release["chart"] == "volcano" and release["version"] == "1.15.1"
    # No preempt, no reclaim: the controller is the one preemptor.
    assert [a.strip() for a in conf["actions"].split(",")] == ["enqueue", "allocate", "backfill"]
    plugins = {p["name"] for tier in conf["tiers"] for p in tier["plugins"]}
    assert {"gang", "priority", "proportion", "drf"} <= plugins


def test_volcano_reserves_cpu_for_idle_gpus_only_when_asked(
    declare: Declare, stack_fleets: dict[str, FleetConfig]
) -> None:
    """`volcano.reserve_cpu_per_idle_gpu` adds resource-strategy-fit's proportional predicate
    (its scores off) and changes nothing else; without it the plugin is not there."""
    fleet = stack_fleets["prod"]
    _, shipped = volcano_release(declare, fleet)
    names = [p["name"] for tier in shipped["tiers"] for p in tier["plugins"]]
    assert "resource-strategy-fit" not in names

    asking = fleet.model_copy(
        update={"volcano": fleet.volcano.model_copy(update={"reserve_cpu_per_idle_gpu": 12})}
    )
    _, conf = volcano_release(declare, asking)
    before = [p for tier in shipped["tiers"] for p in tier["plugins"]]
    added = [p for tier in conf["tiers"] for p in tier["plugins"] if p not in before]
    assert added == [
        {
            "name": "resource-strategy-fit",
            "arguments": {
                "resourceStrategyFitWeight": 0,
                "proportional": {
                    "enable": True,
                    "resources": "nvidia.com/gpu",
                    "resourceProportion": {"nvidia.com/gpu.cpu": 12, "nvidia.com/gpu.memory": 0},
                },
            },
        }
    ]


def test_reserved_cpu_per_idle_gpu_must_be_positive(stack_fleets: dict[str, FleetConfig]) -> None:
    document = stack_fleets["prod"].model_dump(mode="json")
    document["volcano"]["reserve_cpu_per_idle_gpu"] = 0
    with pytest.raises(ValidationError, match="reserve_cpu_per_idle_gpu"):
        FleetConfig.model_validate(document)


def test_volcano_routes_podgroups_to_the_namespace_queue(
    declare: Declare, stack_fleets: dict[str, FleetConfig]
) -> None:
    release, _ = volcano_release(declare, stack_fleets["prod"])
    admissions = release["values"]["custom"]["enabled_admissions"].split(",")
    # PodGroups of plain pods take the team queue from the namespace annotation only with the
    # PodGroup mutating webhook, which the chart leaves out by default; its defaults stay on.
    assert "/podgroups/mutate" in admissions
    assert {"/jobs/mutate", "/jobs/validate", "/podgroups/validate", "/queues/validate"} <= set(
        admissions
    )


def test_volcano_schedules_every_pod_of_a_team_namespace(
    declare: Declare, stack_fleets: dict[str, FleetConfig]
) -> None:
    """Volcano's /pods/mutate with one resource group per team sets `schedulerName: volcano`
    on every pod of the team's namespaces; its webhooks are scoped to team namespaces."""
    fleet = stack_fleets["prod"]
    release, _ = volcano_release(declare, fleet)
    custom = release["values"]["custom"]
    assert "/pods/mutate" in custom["enabled_admissions"].split(",")
    groups = yaml.safe_load(custom["admission_config_override"])["resourceGroups"]
    assert groups == [
        {
            "resourceGroup": team.name,
            "object": {"key": "namespace", "value": team.effective_namespaces},
            "schedulerName": "volcano",
        }
        for team in fleet.teams
    ]
    assert custom["webhooks_namespace_selector_expressions"] == [
        {"key": "fleetplane.dev/team", "operator": "Exists"}
    ]


def binpack_weights(arguments: dict[str, Any]) -> dict[str, int]:
    """Resource -> weight, as upstream Volcano's binpack `calculateWeight` reads its arguments
    (pkg/scheduler/plugins/binpack/binpack.go): `binpack.resources` must be a string of
    comma-separated names, each weighted by `binpack.resources.<name>` (default 1); cpu and
    memory always count. A resource absent from the result is not packed."""

    def weight(key: str) -> int:
        value = arguments.get(key, 1)
        return value if isinstance(value, int) and value >= 0 else 1

    names = arguments.get("binpack.resources")
    weights = {
        name.strip(): weight(f"binpack.resources.{name.strip()}")
        for name in (names if isinstance(names, str) else "").split(",")
        if name.strip()
    }
    weights["cpu"] = weight("binpack.cpu")
    weights["memory"] = weight("binpack.memory")
    return weights


def test_volcano_binpack_packs_accelerators(
    declare: Declare, stack_fleets: dict[str, FleetConfig]
) -> None:
    _, conf = volcano_release(declare, stack_fleets["prod"])
    (binpack,) = [p for tier in conf["tiers"] for p in tier["plugins"] if p["name"] == "binpack"]
    arguments = binpack.get("arguments") or {}
    assert arguments.get("binpack.weight", 1) > 0  # 0 turns the plugin off
    weights = binpack_weights(arguments)
    for resource in ("nvidia.com/gpu", "google.com/tpu"):
        assert weights.get(resource, 0) > max(weights["cpu"], weights["memory"]), resource


def test_one_queue_per_team_with_capability_guarantee_and_weight(
    declare: Declare, stack_fleets: dict[str, FleetConfig]
) -> None:
    fleet = stack_fleets["prod"]
    declared = declare(
        lambda: Volcano("prod-volcano", VolcanoArgs(fleet=fleet, cluster=fleet.clusters[0]))
    )
    queues = {q.inputs["metadata"]["name"]: q.inputs["spec"] for q in declared.of_type(QUEUE)}
    assert queues == {
        "research": {
            "weight": 3,
            "reclaimable": True,
            "capability": {"nvidia.com/gpu": "160", "google.com/tpu": "48"},
            "guarantee": {"resource": {"nvidia.com/gpu": "32", "google.com/tpu": "16"}},
            # Volcano's webhook wants deserved >= guarantee (proportion ignores deserved)
            "deserved": {"nvidia.com/gpu": "32", "google.com/tpu": "16"},
        },
        "serving": {
            "weight": 5,
            "reclaimable": False,
            "capability": {"nvidia.com/gpu": "64", "google.com/tpu": "16"},
            "guarantee": {"resource": {"nvidia.com/gpu": "48"}},
            "deserved": {"nvidia.com/gpu": "48"},
        },
        "analytics": {
            "weight": 1,
            "reclaimable": True,
            "capability": {"nvidia.com/gpu": "32", "google.com/tpu": "0"},
        },
    }
    assert all(
        "Volcano$kubernetes:scheduling.volcano.sh/v1beta1:Queue" in u
        for u in declared.urns
        if "Queue" in u
    )


def test_queues_are_declared_even_without_the_chart(
    declare: Declare, stack_fleets: dict[str, FleetConfig]
) -> None:
    fleet = stack_fleets["local"]
    declared = declare(
        lambda: Volcano("local-volcano", VolcanoArgs(fleet=fleet, cluster=fleet.clusters[0]))
    )
    assert not declared.of_type(RELEASE)
    assert sorted(q.inputs["metadata"]["name"] for q in declared.of_type(QUEUE)) == [
        "analytics",
        "research",
        "serving",
    ]
    assert any("Volcano's chart not installed" in m for m in declared.logs)
    # The release's own CRDs come with the release (the chart, or the local fleet's Volcano).
    assert not declared.kind("CustomResourceDefinition")
