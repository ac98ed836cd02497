"""What the fleet ships to kube-prometheus-stack: the Pushgateway the controller pushes to
(Deployment, Service, ServiceMonitor), the rule set as a PrometheusRule, and the dashboards as
ConfigMaps labelled `grafana_dashboard: "1"` for the Grafana sidecar."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi

from components.kube import (
    Manifest,
    declare_all,
    meta,
    restricted_container_security_context,
    service,
)
from fleet.config import FleetConfig
from fleet.render import PUSHGATEWAY_NAME, PUSHGATEWAY_PORT
from observability.dashboards import dashboards
from observability.rules import rule_groups

COMPONENT = "observability"


@dataclass(frozen=True, kw_only=True)
class ObservabilityArgs:
    fleet: FleetConfig
    provider: pulumi.ProviderResource | None = None
    namespace: pulumi.Resource | None = None


class Observability(pulumi.ComponentResource):
    """The Pushgateway, the PrometheusRule and the dashboards of one cluster."""

    def __init__(
        self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("fleetplane:observability:Observability", name, None, opts)
        fleet = args.fleet
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        namespaces = {fleet.system_namespace: args.namespace} if args.namespace else {}
        self.resources = declare_all(
            name, observability_manifests(fleet), child, namespaces=namespaces
        )
        self.register_outputs(
            {
                "dashboards": sorted(dashboards()),
                "prometheus_rule": fleet.observability.prometheus_operator,
            }
        )


def pushgateway_manifests(config: FleetConfig) -> list[Manifest]:
    settings = config.observability
    ns = config.system_namespace
    selector = {"app.kubernetes.io/name": PUSHGATEWAY_NAME}
    manifests: list[Manifest] = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta(PUSHGATEWAY_NAME, ns, component=COMPONENT, extra_labels=selector),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {"labels": selector},
                    "spec": {
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": 65534,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [
                            {
                                "name": "pushgateway",
                                "image": settings.pushgateway.image,
                                "ports": [{"name": "http", "containerPort": PUSHGATEWAY_PORT}],
                                "readinessProbe": {"httpGet": {"path": "/-/ready", "port": "http"}},
                                "resources": {
                                    "requests": {"cpu": "10m", "memory": "32Mi"},
                                    "limits": {"memory": "128Mi"},
                                },
                                "securityContext": restricted_container_security_context(),
                            }
                        ],
                    },
                },
            },
        },
        service(
            PUSHGATEWAY_NAME,
            ns,
            component=COMPONENT,
            selector=selector,
            ports={"http": PUSHGATEWAY_PORT},
            extra_labels=selector,
        ),
    ]
    if settings.prometheus_operator:
        manifests.append(
            {
                "apiVersion": "monitoring.coreos.com/v1",
                "kind": "ServiceMonitor",
                "metadata": meta(
                    PUSHGATEWAY_NAME,
                    ns,
                    component=COMPONENT,
                    extra_labels={**settings.rule_labels, **selector},
                ),
                "spec": {
                    "selector": {"matchLabels": selector},
                    # the pushed job label names the controller, not the Pushgateway
                    "endpoints": [{"port": "http", "interval": "30s", "honorLabels": True}],
                },
            }
        )
    return manifests


def observability_manifests(config: FleetConfig) -> list[Manifest]:
    """The Pushgateway (when deployed), and with kube-prometheus-stack the PrometheusRule and
    one ConfigMap per dashboard."""
    settings = config.observability
    manifests = pushgateway_manifests(config) if settings.pushgateway.deploy else []
    if not settings.prometheus_operator:
        return manifests
    manifests.append(
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": meta(
                "fleetplane",
                config.system_namespace,
                component=COMPONENT,
                extra_labels=settings.rule_labels,
            ),
            "spec": {"groups": rule_groups(config)},
        }
    )
    for name, model in sorted(dashboards().items()):
        manifests.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": meta(
                    name.removesuffix(".json"),
                    settings.namespace,
                    component=COMPONENT,
                    extra_labels={"grafana_dashboard": "1"},
                ),
                "data": {name: json.dumps(model, indent=1, sort_keys=True)},
            }
        )
    return manifests
