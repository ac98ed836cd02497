"""Team tenancy (namespaces, quotas, defaults, RBAC) and the cluster-wide workload classes."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.config import FleetConfig, TeamConfig
from components.kube import declare_all
from components.manifests import priority_classes, team_manifests


@dataclass(frozen=True, kw_only=True)
class TeamTenancyArgs:
    """fleet: the validated fleet; team: which team; provider: the cluster's kubernetes provider."""

    fleet: FleetConfig
    team: TeamConfig
    provider: pulumi.ProviderResource | None = None


class TeamTenancy(pulumi.ComponentResource):
    """A team's namespaces (labelled for the admission webhook, annotated with the team's
    default Volcano queue), one ResourceQuota per accelerator resource, a LimitRange with
    container defaults, and a RoleBinding of the team's groups to `edit`."""

    resources: list[pulumi.CustomResource]

    def __init__(
        self, name: str, args: TeamTenancyArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("fleetplane:tenancy:TeamTenancy", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        self.resources = declare_all(name, team_manifests(args.fleet, args.team), child)
        self.register_outputs(
            {
                "team": args.team.name,
                "namespaces": args.team.effective_namespaces,
                "queue": args.team.name,
            }
        )


@dataclass(frozen=True, kw_only=True)
class WorkloadClassesArgs:
    """fleet: the validated fleet; provider: the cluster's kubernetes provider."""

    fleet: FleetConfig
    provider: pulumi.ProviderResource | None = None


class WorkloadClasses(pulumi.ComponentResource):
    """The PriorityClasses of every workload type. Cluster-scoped and shared by all teams, so
    declared once per cluster, not per team."""

    resources: list[pulumi.CustomResource]

    def __init__(
        self, name: str, args: WorkloadClassesArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("fleetplane:tenancy:WorkloadClasses", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        manifests = priority_classes(args.fleet)
        self.resources = declare_all(name, manifests, child)
        self.register_outputs({"priority_classes": [m["metadata"]["name"] for m in manifests]})
