"""The whole fleet from one configuration: what `stacks/__main__.py` declares."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pulumi
import pulumi_aws as aws
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.admission_front import admission_front_manifests, generated_front_material
from components.cloud_upgrades import GkeUpgradePolicy, GkeUpgradePolicyArgs
from components.controller_job import ControllerJob, ControllerJobArgs, controller_manifests
from components.gpu_operator import GpuOperator, GpuOperatorArgs
from components.karpenter import KarpenterPools, KarpenterPoolsArgs
from components.kube import Manifest, declare
from components.nodepools import GpuNodePool, NodePoolArgs, TpuNodePool, node_pool_for
from components.observability import (
    Observability,
    ObservabilityArgs,
    observability_manifests,
)
from components.placement import placement_manifests
from components.policy_gate import (
    PolicyGate,
    PolicyGateArgs,
    opa_tls_dns_names,
    policy_gate_manifests,
    read_policies,
)
from components.queue_defaults import QueueDefaults, QueueDefaultsArgs, queue_defaults_manifests
from components.tenancy import (
    TeamTenancy,
    TeamTenancyArgs,
    WorkloadClasses,
    WorkloadClassesArgs,
    priority_classes,
    system_namespace,
    team_manifests,
)
from components.tls import TlsMaterial, generate_tls_bundle
from components.tokens import TokenMaterial, generate_token
from components.volcano import Volcano, VolcanoArgs, volcano_queues
from fleet.config import ClusterConfig, FleetConfig
from fleet.karpenter import karpenter_manifests, karpenter_pools
from fleet.project import find_project
from fleet.project import policies_dir as project_policies


def project_root() -> Path:
    """The project `pulumi` runs the program in (it starts it in the project's directory)."""
    return find_project() or Path.cwd()


LOCAL_KUBECONFIG = ".fleet/local/kubeconfig"
"""Kubeconfig of a local cluster when neither the cluster nor the stack names one."""


def cluster_kubeconfig(
    cluster: ClusterConfig, stack_kubeconfig: str | None, repo_root: Path | None = None
) -> str | None:
    """Absolute kubeconfig path of a cluster: its own setting, else the stack's
    `fleetplane:kubeconfig`, else `.fleet/local/kubeconfig` for local clusters; None leaves
    the provider to the ambient KUBECONFIG. Relative paths are relative to the repository."""
    chosen = cluster.kubeconfig or stack_kubeconfig
    if chosen is None and cluster.provider == "local":
        chosen = LOCAL_KUBECONFIG
    if chosen is None:
        return None
    path = Path(chosen).expanduser()
    return str(path if path.is_absolute() else (repo_root or project_root()) / path)


@dataclass(frozen=True, kw_only=True)
class PlatformArgs:
    """fleet: the validated fleet; kubeconfig: the stack's `fleetplane:kubeconfig` (None:
    see `cluster_kubeconfig`); repo_root: base of relative paths; policies_dir: Rego sources
    for the admission gate."""

    fleet: FleetConfig
    kubeconfig: str | None = None
    repo_root: Path = field(default_factory=project_root)
    policies_dir: Path = field(default_factory=project_policies)


@dataclass
class ClusterParts:
    """What the platform declared in one cluster."""

    kubernetes: k8s.Provider
    pools: dict[str, GpuNodePool | TpuNodePool] = field(default_factory=dict)
    upgrade_policy: GkeUpgradePolicy | None = None
    teams: dict[str, TeamTenancy] = field(default_factory=dict)
    queue_defaults: QueueDefaults | None = None
    gpu_operator: GpuOperator | None = None
    volcano: Volcano | None = None
    policy_gate: PolicyGate | None = None
    controller: ControllerJob | None = None
    observability: Observability | None = None


class Platform(pulumi.ComponentResource):
    """Per cluster: node pools, workload classes, GPU Operator, Volcano with team queues,
    team tenancy, the OPA admission gate and the controller CronJob."""

    clusters: dict[str, ClusterParts]

    def __init__(
        self, name: str, args: PlatformArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("fleetplane:index:Platform", name, None, opts)
        self.clusters = {c.name: self._cluster(c, args) for c in args.fleet.clusters}
        self.register_outputs(
            {
                "clusters": {
                    name: {
                        "pools": sorted(parts.pools),
                        "teams": sorted(parts.teams),
                        "gpu_operator": parts.gpu_operator is not None
                        and parts.gpu_operator.release is not None,
                        "admission_gate": parts.policy_gate is not None,
                    }
                    for name, parts in self.clusters.items()
                }
            }
        )

    def _cluster(self, cluster: ClusterConfig, args: PlatformArgs) -> ClusterParts:
        fleet = args.fleet
        here = pulumi.ResourceOptions(parent=self)
        prefix = cluster.name
        kubeconfig = cluster_kubeconfig(cluster, args.kubeconfig, args.repo_root)
        # ConfigMaps keep their names and change in place (the provider's default replaces
        # them): OPA's policies and data, and the controller's configuration, are read by name,
        # and the OPA Deployment rolls on the digest of their content.
        kubernetes = k8s.Provider(
            f"{prefix}-kubernetes",
            k8s.ProviderArgs(kubeconfig=kubeconfig, enable_config_map_mutable=True),
            opts=here,
        )
        parts = ClusterParts(kubernetes=kubernetes)

        cloud: pulumi.ProviderResource | None = None
        if cluster.provider == "aws" and cluster.pools:
            cloud = aws.Provider(
                f"{prefix}-aws", aws.ProviderArgs(region=cluster.region), opts=here
            )
        elif cluster.provider == "gcp" and cluster.pools:
            cloud = gcp.Provider(
                f"{prefix}-gcp", gcp.ProviderArgs(project=cluster.project), opts=here
            )
            parts.upgrade_policy = GkeUpgradePolicy(
                f"{prefix}-upgrade-policy",
                GkeUpgradePolicyArgs(fleet=fleet, cluster=cluster, provider=cloud),
                here,
            )
        for pool in cluster.pools:
            parts.pools[pool.name] = node_pool_for(
                f"{prefix}-{pool.name}",
                NodePoolArgs(fleet=fleet, cluster=cluster, pool=pool, provider=cloud),
                here,
            )
        if karpenter_pools(cluster):
            KarpenterPools(
                f"{prefix}-karpenter",
                KarpenterPoolsArgs(fleet=fleet, cluster=cluster, provider=kubernetes),
                here,
            )

        namespace = declare(
            prefix,
            system_namespace(fleet),
            pulumi.ResourceOptions(parent=self, provider=kubernetes),
        )
        WorkloadClasses(
            f"{prefix}-workload-classes",
            WorkloadClassesArgs(fleet=fleet, provider=kubernetes),
            here,
        )
        if any(not p.accelerator.is_tpu for p in cluster.pools):
            parts.gpu_operator = GpuOperator(
                f"{prefix}-gpu-operator",
                GpuOperatorArgs(fleet=fleet, cluster=cluster, provider=kubernetes),
                here,
            )
        parts.volcano = Volcano(
            f"{prefix}-volcano",
            VolcanoArgs(fleet=fleet, cluster=cluster, provider=kubernetes),
            here,
        )
        for team in fleet.teams:
            parts.teams[team.name] = TeamTenancy(
                f"{prefix}-{team.name}",
                TeamTenancyArgs(fleet=fleet, team=team, provider=kubernetes),
                here,
            )
        parts.queue_defaults = QueueDefaults(
            f"{prefix}-queue-defaults",
            QueueDefaultsArgs(fleet=fleet, provider=kubernetes),
            here,
        )
        if fleet.opa.gate:
            parts.policy_gate = PolicyGate(
                f"{prefix}-opa",
                PolicyGateArgs(
                    fleet=fleet,
                    policies_dir=args.policies_dir,
                    provider=kubernetes,
                    namespace=namespace,
                ),
                here,
            )
        if fleet.controller.deploy:
            parts.controller = ControllerJob(
                f"{prefix}-controller",
                ControllerJobArgs(fleet=fleet, provider=kubernetes, namespace=namespace),
                here,
            )
        if fleet.observability.pushgateway.deploy or fleet.observability.prometheus_operator:
            parts.observability = Observability(
                f"{prefix}-observability",
                ObservabilityArgs(fleet=fleet, provider=kubernetes, namespace=namespace),
                here,
            )
        return parts


def render_manifests(
    config: FleetConfig,
    *,
    policies_dir: Path | None = None,
    tls: TlsMaterial | None = None,
    controller_token: TokenMaterial | None = None,
) -> list[Manifest]:
    """Every Kubernetes object the components declare in a cluster, in apply order.

    Helm releases are not included (their objects come from the charts, Volcano's CRDs among
    them; a cluster without charts runs the same release's CRDs outside Pulumi). When `tls` is not
    given and the admission gate is declared, throwaway TLS material is generated (and a
    throwaway controller token without `controller_token`).
    """
    manifests = [system_namespace(config), *priority_classes(config)]
    for team in config.teams:
        manifests += team_manifests(config, team)
    manifests += volcano_queues(config)
    manifests += placement_manifests(config)  # `volcano.placement: fgd`, as the Volcano component
    manifests += queue_defaults_manifests(config)
    if config.opa.gate:
        if tls is None:
            tls = TlsMaterial(
                **generate_tls_bundle(dns_names=opa_tls_dns_names(config), validity_days=1)
            )
        if controller_token is None:
            controller_token = TokenMaterial(**generate_token())
        front = generated_front_material(config) if config.opa.admission_front.enabled else None
        if front is not None:
            manifests += admission_front_manifests(config, front)
        manifests += policy_gate_manifests(
            config, read_policies(policies_dir), tls, controller_token, front=front
        )
    if config.controller.deploy:
        manifests += controller_manifests(config)
    manifests += observability_manifests(config)
    for cluster in config.clusters:
        manifests += karpenter_manifests(config, cluster)
    return manifests
