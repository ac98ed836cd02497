"""The NVIDIA GPU Operator, as a pinned Helm release."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from fleet import dcgm, labels
from fleet.config import ClusterConfig, FleetConfig
from fleet.nodes import device_plugin_config_name, uses_native_gke_gpu_features

DEVICE_PLUGIN_CONFIG = "fleetplane-device-plugin"
"""ConfigMap the chart creates with one device-plugin configuration per sharing pool."""
DEFAULT_DEVICE_PLUGIN_CONFIG = "default"
DCGM_METRICS_CONFIG = "fleetplane-dcgm-metrics"
"""ConfigMap the chart creates with the fleet's dcgm-exporter counters file (fleet/dcgm.py)."""


@dataclass(frozen=True, kw_only=True)
class GpuOperatorArgs:
    """fleet: the validated fleet; cluster: where to install; provider: its kubernetes provider."""

    fleet: FleetConfig
    cluster: ClusterConfig
    provider: pulumi.ProviderResource | None = None


def _device_plugin_config(fleet: FleetConfig, sharing: Any | None) -> str:
    config: dict[str, Any] = {
        "version": "v1",
        "flags": {"migStrategy": fleet.gpu_operator.mig_strategy},
    }
    if sharing is not None:
        key = "mps" if sharing.strategy == "mps" else "timeSlicing"
        config["sharing"] = {
            key: {
                "resources": [
                    {"name": labels.GPU_RESOURCE, "replicas": sharing.max_shared_clients_per_gpu}
                ]
            }
        }
    return yaml.safe_dump(config, sort_keys=False)


def gpu_operator_values(fleet: FleetConfig, cluster: ClusterConfig) -> dict[str, Any]:
    """Helm values: pinned driver without automatic upgrades (the controller rolls drivers
    node by node), DCGM exporter with a ServiceMonitor and the fleet's counters file
    (`dcgm_exporter_config`), MIG strategy and manager, and one device-plugin configuration
    (time-slicing or MPS) per sharing pool, selected by the `nvidia.com/device-plugin.config`
    label the pool puts on its nodes."""
    settings = fleet.gpu_operator
    operator_pools = [
        p
        for p in cluster.pools
        if not p.accelerator.is_tpu and not uses_native_gke_gpu_features(fleet, p)
    ]
    plugin_configs = {DEFAULT_DEVICE_PLUGIN_CONFIG: _device_plugin_config(fleet, None)}
    for pool in operator_pools:
        if pool.gpu_sharing is not None:
            plugin_configs[device_plugin_config_name(pool)] = _device_plugin_config(
                fleet, pool.gpu_sharing
            )
    # Operator daemonsets must also run on spot nodes.
    tolerations = [
        {"key": labels.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
        {"key": labels.CAPACITY_TYPE, "operator": "Exists", "effect": "NoSchedule"},
    ]
    return {
        "operator": {"defaultRuntime": "containerd"},
        "daemonsets": {"tolerations": tolerations},
        "node-feature-discovery": {"worker": {"tolerations": tolerations}},
        "driver": {
            "enabled": any(fleet.driver_manager(p) == "gpu-operator" for p in operator_pools),
            "version": settings.driver_version,
            "upgradePolicy": {"autoUpgrade": False},
        },
        # A container's GPUs come only from what the device plugin granted it: the runtime
        # ignores NVIDIA_VISIBLE_DEVICES (and NVIDIA_IMEX_CHANNELS) in unprivileged
        # containers, so a CUDA image's own `NVIDIA_VISIBLE_DEVICES=all` exposes nothing to
        # a sidecar, init or ephemeral container without a request, and reads the device
        # list from the /dev/null mounts under /var/run/nvidia-container-devices the device
        # plugin adds (DEVICE_LIST_STRATEGY below; a pod could forge one only with a hostPath,
        # which the gate refuses). Privileged containers, which still may, are refused by the
        # gate outside the platform's namespaces.
        "toolkit": {
            "enabled": True,
            "env": [
                {
                    "name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED",
                    "value": "false",
                },
                {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "value": "true"},
            ],
        },
        "mig": {"strategy": settings.mig_strategy},
        "migManager": {"enabled": any(p.mig_profile for p in operator_pools)},
        "devicePlugin": {
            # The toolkit above reads devices from these mounts only: without them every
            # GPU container would get none.
            "env": [{"name": "DEVICE_LIST_STRATEGY", "value": "volume-mounts"}],
            "config": {
                "create": True,
                "name": DEVICE_PLUGIN_CONFIG,
                "default": DEFAULT_DEVICE_PLUGIN_CONFIG,
                "data": plugin_configs,
            },
        },
        "dcgmExporter": {
            "enabled": True,
            "serviceMonitor": dcgm_service_monitor(fleet),
            "config": dcgm_exporter_config(),
        },
        "nfd": {"enabled": True},
        "gfd": {"enabled": True},
    }


DCGM_EXPORTER = "nvidia-dcgm-exporter"
"""The GPU Operator's name for the exporter's DaemonSet, Service and container."""
DCGM_EXPORTER_PORT = "gpu-metrics"
"""The port name of the exporter's Service (the ServiceMonitor's endpoint)."""


def dcgm_service_monitor(fleet: FleetConfig) -> dict[str, Any]:
    """The GPU Operator chart's `dcgmExporter.serviceMonitor` values: how Prometheus scrapes
    the exporter. The local fleet renders the same declaration into its Prometheus's scrape
    configuration (`localfleet.dcgm_exporter.scrape_config`).

    honorLabels must be true: dcgm-exporter labels each GPU's series with the `pod`,
    `namespace` and `container` of the workload holding it, and the Prometheus Operator adds
    target labels of the same names (the exporter's own pod). With false, Prometheus keeps the
    target's and renames the workload's to `exported_pod` and `exported_namespace`, and the
    controller's evidence join on `namespace`/`pod` finds no GPU for any workload: idle
    reclaim would be blind."""
    return {
        "enabled": True,
        "interval": f"{fleet.gpu_operator.dcgm_scrape_interval_seconds}s",
        "honorLabels": True,
        "additionalLabels": {},
        "relabelings": [],
    }


def dcgm_exporter_config() -> dict[str, Any]:
    """The GPU Operator chart's `dcgmExporter.config` values: the fleet's counters file
    (`fleet.dcgm.counters_csv`, exactly the DCGM fields the product reads) in a ConfigMap the
    chart creates in the release's namespace (`create` with `data`, under the key
    `dcgm-metrics.csv`; the chart's template since v24.9.0). The ClusterPolicy names it
    (`dcgmExporter.config.name`); the operator mounts that key at
    /etc/dcgm-exporter/dcgm-metrics.csv and points the exporter's DCGM_EXPORTER_COLLECTORS at
    it, in place of the image's dcp-metrics-included.csv, which leaves the ECC and NVLink error
    counters and the row-remap-pending flag off."""
    return {"name": DCGM_METRICS_CONFIG, "create": True, "data": dcgm.counters_csv()}


class GpuOperator(pulumi.ComponentResource):
    """The GPU Operator release of one cluster; skipped (with a log line) when the cluster
    installs no Helm charts."""

    release: k8s.helm.v3.Release | None

    def __init__(
        self, name: str, args: GpuOperatorArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("fleetplane:addons:GpuOperator", name, None, opts)
        fleet, cluster = args.fleet, args.cluster
        settings = fleet.gpu_operator
        self.release = None
        if not cluster.helm_charts:
            pulumi.log.info(
                f"GPU Operator not installed in cluster {cluster.name!r}: helm_charts is off "
                "(offline); nodes carry the operator's labels already (fake nodes)",
                resource=self,
            )
        else:
            self.release = k8s.helm.v3.Release(
                name,
                k8s.helm.v3.ReleaseArgs(
                    name="gpu-operator",
                    chart="gpu-operator",
                    version=settings.chart_version,
                    repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=settings.repository),
                    namespace=settings.namespace,
                    create_namespace=True,
                    values=gpu_operator_values(fleet, cluster),
                    timeout=900,
                ),
                opts=pulumi.ResourceOptions(parent=self, provider=args.provider),
            )
        self.register_outputs(
            {
                "installed": self.release is not None,
                "chart_version": settings.chart_version,
                "driver_version": settings.driver_version,
            }
        )
