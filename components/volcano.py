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

BINPACK_ARGUMENTS: dict[str, Any] = {
    # Upstream binpack (pkg/scheduler/plugins/binpack/binpack.go) scores only cpu, memory and
    # the resources named in `binpack.resources`, a comma-separated string (not a list), each
    # weighted by `binpack.resources.<name>` (default 1). Without it accelerators are not
    # packed at all. Accelerators weigh 10 against cpu and memory's 1, so a free GPU or TPU
    # slot decides the node, and the plugin's weight outranks nodeorder's spreading
    # (leastrequested).
    "binpack.weight": 10,
    "binpack.cpu": 1,
    "binpack.memory": 1,
    "binpack.resources": f"{labels.GPU_RESOURCE}, {labels.TPU_RESOURCE}",
    f"binpack.resources.{labels.GPU_RESOURCE}": 10,
    f"binpack.resources.{labels.TPU_RESOURCE}": 10,
}

SCHEDULER_TIERS: list[dict[str, Any]] = [
    {
        "plugins": [
            {"name": "priority"},
            {"name": "gang", "enablePreemptable": False},
            {"name": "conformance"},
        ]
    },
    {
        "plugins": [
            {"name": "drf", "enablePreemptable": False},
            {"name": "predicates"},
            {"name": "proportion"},
            {"name": "nodeorder"},
            {"name": "binpack", "arguments": BINPACK_ARGUMENTS},
        ]
    },
]
"""Gang scheduling and priority first; then fair share (drf), per-queue proportion with
guarantees and capabilities, and packing accelerators onto as few nodes as possible."""


def scheduler_config(fleet: FleetConfig) -> str:
    """The `volcano-scheduler.conf` document."""
    return yaml.safe_dump(
        {"actions": ", ".join(fleet.volcano.actions), "tiers": SCHEDULER_TIERS}, sort_keys=False
    )


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
