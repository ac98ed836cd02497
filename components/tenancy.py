"""Team tenancy (namespaces, quotas, defaults, RBAC) and the cluster-wide workload classes."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.dra_quota import dra_quota
from components.kube import Manifest, declare_all, meta
from fleet import labels
from fleet.config import FleetConfig, TeamConfig


@dataclass(frozen=True, kw_only=True)
class TeamTenancyArgs:
    """fleet: the validated fleet; team: which team; provider: the cluster's kubernetes provider."""

    fleet: FleetConfig
    team: TeamConfig
    provider: pulumi.ProviderResource | None = None


class TeamTenancy(pulumi.ComponentResource):
    """A team's namespaces (labelled for the admission webhook, annotated with the team's
    default Volcano queue), a LimitRange with container defaults, a RoleBinding of the
    team's groups to `edit`, and the one permission its ServiceAccounts get (`patch` on pods,
    to record checkpoints: `checkpoint_rbac`). The team's accelerator quota is its Volcano queue's capability
    (components.volcano), one limit across all its namespaces: a ResourceQuota per namespace
    would give each namespace the whole quota again."""

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


def system_namespace(config: FleetConfig) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": meta(config.system_namespace, component="system"),
    }


def priority_classes(config: FleetConfig) -> list[Manifest]:
    """One PriorityClass per class of every workload type (cluster-scoped, shared by teams)."""
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": meta(
                pc.name,
                component="workload-classes",
                extra_labels={labels.WORKLOAD_TYPE: type_name},
            ),
            "value": pc.value,
            "preemptionPolicy": pc.preemption_policy,
            "globalDefault": False,
            "description": pc.description or f"fleetplane {type_name} workloads",
        }
        for type_name, wt in config.workload_types.items()
        for pc in wt.priority_classes
    ]


def team_manifests(config: FleetConfig, team: TeamConfig) -> list[Manifest]:
    """Namespaces, container defaults and RBAC of one team (its quota is its queue's)."""
    out: list[Manifest] = []
    team_label = {labels.TEAM: team.name}
    for ns in team.effective_namespaces:
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": meta(
                    ns,
                    component="tenancy",
                    extra_labels=team_label,
                    annotations={labels.VOLCANO_QUEUE_NAME: team.name},
                ),
            }
        )
        defaults = team.container_defaults
        # CPU and memory only: a LimitRange max on an extended resource would make every
        # container declare a limit for it. Per-workload accelerator limits are OPA's.
        out.append(
            {
                "apiVersion": "v1",
                "kind": "LimitRange",
                "metadata": meta(
                    "container-defaults", ns, component="tenancy", extra_labels=team_label
                ),
                "spec": {
                    "limits": [
                        {
                            "type": "Container",
                            "defaultRequest": {
                                "cpu": defaults.cpu_request,
                                "memory": defaults.memory_request,
                            },
                            "default": {
                                "cpu": defaults.cpu_limit,
                                "memory": defaults.memory_limit,
                            },
                        }
                    ]
                },
            }
        )
        if team.groups:
            out.append(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": meta(
                        "team-members", ns, component="tenancy", extra_labels=team_label
                    ),
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": "edit",
                    },
                    "subjects": [
                        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}
                        for g in team.groups
                    ],
                }
            )
        out += checkpoint_rbac(ns, team_label)
        out += dra_quota(team, ns, team_label)  # claimed GPUs (components/dra_quota.py)
    return out


CHECKPOINT_ROLE = "fleetplane-checkpoint"
"""The Role that lets a team's pods record a checkpoint on themselves (fleetplane.checkpoint)."""


def checkpoint_rbac(namespace: str, team_label: dict[str, str]) -> list[Manifest]:
    """`patch` on pods in `namespace`, bound to every ServiceAccount of that namespace: what
    `fleetplane checkpoint` needs to merge-patch its own pod's `fleetplane.dev/last-checkpoint`,
    and no more (no get, list, create or delete; no other namespace). RBAC cannot narrow a
    patch to one annotation (nor to the caller's own pod): the admission gate refuses every
    other platform-owned key a team identity would change with it."""
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta(
                CHECKPOINT_ROLE, namespace, component="tenancy", extra_labels=team_label
            ),
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta(
                CHECKPOINT_ROLE, namespace, component="tenancy", extra_labels=team_label
            ),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": CHECKPOINT_ROLE,
            },
            "subjects": [
                {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Group",
                    "name": f"system:serviceaccounts:{namespace}",
                }
            ],
        },
    ]


# ---------------------------------------------------------------------------------------------
# OPA admission gate
# ---------------------------------------------------------------------------------------------
