"""Volcano: the batch scheduler (Helm release) and one queue per team."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.kube import Manifest, declare, meta
from components.placement import placement_manifests
from fleet import labels
from fleet.config import ClusterConfig, FleetConfig
from fleet.volcano import scheduler_config

ADMISSIONS: tuple[str, ...] = (
    # the chart's default set (installer/helm/chart/volcano/values.yaml)
    "/jobs/mutate",
    "/jobs/validate",
    "/podgroups/validate",
    "/queues/mutate",
    "/queues/validate",
    "/hypernodes/validate",
    # Not in the default set: it gives a PodGroup that names no queue (those Volcano
    # creates for plain pods, Deployments and Jobs scheduled by it) the queue in its
    # namespace's `scheduling.volcano.sh/queue-name` annotation, i.e. the team's queue.
    # Without it they land in `default`, outside every team's quota. Volcano Jobs get
    # `default` from /jobs/mutate instead; the admission gate's queue rule refuses those.
    "/podgroups/mutate",
    # Not in the default set either: with `admission_config` below it sets
    # `schedulerName: volcano` on every pod created in a team namespace, whatever the user
    # (or the Deployment, Job, StatefulSet template) wrote. A pod left to kube-scheduler
    # would skip the team's queue, and with it the team-wide limit.
    "/pods/mutate",
)
"""Volcano's admission webhooks, enabled in the chart and run by the local fleet alike."""

ENABLED_ADMISSIONS = ",".join(ADMISSIONS)

SCHEDULER_NAME = "volcano"
"""The schedulerName of Volcano's scheduler (the chart's and the local fleet's)."""


def admission_config(fleet: FleetConfig) -> str:
    """The `volcano-admission.conf` document: one resource group per team, matched by its
    namespaces, whose pods Volcano's /pods/mutate hands to the Volcano scheduler."""
    groups = [
        {
            "resourceGroup": team.name,
            "object": {"key": "namespace", "value": list(team.effective_namespaces)},
            "schedulerName": SCHEDULER_NAME,
        }
        for team in fleet.teams
    ]
    return yaml.safe_dump({"resourceGroups": groups}, sort_keys=False)


WEBHOOK_NAMESPACE_SELECTOR: list[dict[str, Any]] = [{"key": labels.TEAM, "operator": "Exists"}]
"""Added to every Volcano webhook's namespaceSelector: only team namespaces go through them.
Their failurePolicy is Fail (the chart's), so while Volcano's webhook is down a team namespace
admits nothing Volcano has not seen, and every other namespace (the system's, monitoring's)
keeps working. Cluster-scoped Queues are not namespaced: the selector does not apply to them."""


def volcano_values(fleet: FleetConfig) -> dict[str, Any]:
    return {
        "custom": {
            "scheduler_config_override": scheduler_config(fleet),
            "enabled_admissions": ENABLED_ADMISSIONS,
            "admission_config_override": admission_config(fleet),
            "webhooks_namespace_selector_expressions": WEBHOOK_NAMESPACE_SELECTOR,
        }
    }


@dataclass(frozen=True, kw_only=True)
class VolcanoArgs:
    """fleet: the validated fleet; cluster: where to install; provider: its kubernetes provider."""

    fleet: FleetConfig
    cluster: ClusterConfig
    provider: pulumi.ProviderResource | None = None


class Volcano(pulumi.ComponentResource):
    """The Volcano release and the team queues. A cluster that installs no Helm charts
    (offline: the local fleet) runs the same Volcano release outside Pulumi, with the CRDs of
    that release and the configuration rendered here (`localfleet.volcano`); only the queues
    are declared then."""

    release: k8s.helm.v3.Release | None
    queues: dict[str, pulumi.CustomResource]
    placement: list[pulumi.CustomResource]

    def __init__(
        self, name: str, args: VolcanoArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("fleetplane:addons:Volcano", name, None, opts)
        fleet, cluster = args.fleet, args.cluster
        settings = fleet.volcano
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        self.release = None
        if not cluster.helm_charts:
            pulumi.log.info(
                f"Volcano's chart not installed in cluster {cluster.name!r}: helm_charts is "
                "off (offline); the Volcano release and its CRDs are expected to run there "
                "already (the local fleet runs them), only the team queues are declared",
                resource=self,
            )
        else:
            self.release = k8s.helm.v3.Release(
                name,
                k8s.helm.v3.ReleaseArgs(
                    name="volcano",
                    chart="volcano",
                    version=settings.chart_version,
                    repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=settings.repository),
                    namespace=settings.namespace,
                    create_namespace=True,
                    values=volcano_values(fleet),
                ),
                opts=child,
            )
        queue_opts = pulumi.ResourceOptions.merge(
            child,
            pulumi.ResourceOptions(depends_on=[self.release] if self.release else []),
        )
        self.queues = {
            q["metadata"]["name"]: declare(name, q, queue_opts) for q in volcano_queues(fleet)
        }
        # `volcano.placement: fgd`: the service the scheduler's extender calls.
        self.placement = [declare(name, m, queue_opts) for m in placement_manifests(fleet)]
        self.register_outputs(
            {
                "installed": self.release is not None,
                "queues": sorted(self.queues),
                "placement": settings.placement,
            }
        )


def volcano_queues(config: FleetConfig) -> list[Manifest]:
    """One Volcano Queue per team: weight, capability (quota), guarantee, reclaimable."""
    resources = config.accelerator_resources()
    queues = []
    for team in config.teams:
        spec: dict[str, Any] = {
            "weight": team.queue_weight,
            "reclaimable": team.reclaimable,
            "capability": {r: str(team.quota.get(r, 0)) for r in resources},
        }
        guarantee = {r: str(n) for r, n in team.guaranteed.items() if n > 0}
        if guarantee:
            spec["guarantee"] = {"resource": guarantee}
            # Volcano's queue webhook (1.15) refuses a guarantee above `deserved`, unset
            # included. The proportion plugin computes deserved shares from the weights and
            # never reads this field (the capacity plugin would), so the guarantee itself is
            # declared: the least claim that passes, changing no share.
            spec["deserved"] = dict(guarantee)
        queues.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": meta(
                    team.name, component="volcano", extra_labels={labels.TEAM: team.name}
                ),
                "spec": spec,
            }
        )
    return queues


# ---------------------------------------------------------------------------------------------
# Teams
# ---------------------------------------------------------------------------------------------
