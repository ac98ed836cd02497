"""Volcano: the batch scheduler (Helm release) and one queue per team."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.kube import Manifest, declare, meta
from fleet import labels
from fleet.config import ClusterConfig, FleetConfig
from fleet.volcano import scheduler_config

ENABLED_ADMISSIONS = ",".join(
    (
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
    )
)


def volcano_values(fleet: FleetConfig) -> dict[str, Any]:
    return {
        "custom": {
            "scheduler_config_override": scheduler_config(fleet),
            "enabled_admissions": ENABLED_ADMISSIONS,
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
    (offline) gets Volcano's CRDs instead of the release (`components/crds/volcano.yaml`), so
    the queues are declared in every case."""

    release: k8s.helm.v3.Release | None
    crds: list[pulumi.CustomResource]
    queues: dict[str, pulumi.CustomResource]

    def __init__(
        self, name: str, args: VolcanoArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("fleetplane:addons:Volcano", name, None, opts)
        fleet, cluster = args.fleet, args.cluster
        settings = fleet.volcano
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        self.release = None
        self.crds = []
        if not cluster.helm_charts:
            pulumi.log.info(
                f"Volcano not installed in cluster {cluster.name!r}: helm_charts is off "
                "(offline); only its CRDs are declared, for the team queues",
                resource=self,
            )
            self.crds = [declare(name, crd, child) for crd in volcano_crds()]
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
            pulumi.ResourceOptions(depends_on=[self.release] if self.release else list(self.crds)),
        )
        self.queues = {
            q["metadata"]["name"]: declare(name, q, queue_opts) for q in volcano_queues(fleet)
        }
        self.register_outputs(
            {
                "installed": self.release is not None,
                "crds": len(self.crds),
                "queues": sorted(self.queues),
            }
        )


VOLCANO_CRDS = Path(__file__).resolve().parent / "crds" / "volcano.yaml"
"""Volcano's CustomResourceDefinitions for clusters without the Volcano chart (offline)."""


def volcano_crds(path: Path = VOLCANO_CRDS) -> list[Manifest]:
    """The CRDs of the Volcano kinds the platform declares, reads and writes (Queue, PodGroup,
    Job, Command)."""
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


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
