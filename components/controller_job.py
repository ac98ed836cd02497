"""The runtime controller, run by a CronJob with least-privilege RBAC."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.config import FleetConfig
from components.kube import declare_all
from components.manifests import controller_manifests
from components.render import cron_schedule


@dataclass(frozen=True, kw_only=True)
class ControllerJobArgs:
    """fleet: the validated fleet; provider: the cluster's kubernetes provider; namespace:
    the system Namespace resource, when declared by the caller (objects wait for it)."""

    fleet: FleetConfig
    provider: pulumi.ProviderResource | None = None
    namespace: pulumi.Resource | None = None


class ControllerJob(pulumi.ComponentResource):
    """`python -m controller reconcile` every `controller.period_seconds`, never two at once
    (`concurrencyPolicy: Forbid`), reading the rendered configuration from a ConfigMap."""

    resources: list[pulumi.CustomResource]

    def __init__(
        self, name: str, args: ControllerJobArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("fleetplane:controller:ControllerJob", name, None, opts)
        fleet = args.fleet
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        namespaces = {fleet.system_namespace: args.namespace} if args.namespace else {}
        self.resources = declare_all(
            name, controller_manifests(fleet), child, namespaces=namespaces
        )
        self.register_outputs(
            {
                "schedule": cron_schedule(fleet.controller.period_seconds),
                "image": fleet.controller.image,
            }
        )
