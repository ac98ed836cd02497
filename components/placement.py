"""The placement service that Volcano's scheduler calls when `volcano.placement` is fgd
(placement/, docs/placement.md): a Deployment of two replicas, its Service (the URL the
scheduler's extender tiers name, fleet.placement), a ServiceAccount without API access (the
service reads only what the scheduler sends it), a PodDisruptionBudget and, with
kube-prometheus-stack, a ServiceMonitor for its metrics (the alerts read them)."""

from __future__ import annotations

from typing import Any

from components.kube import (
    Manifest,
    common_labels,
    meta,
    restricted_container_security_context,
    service,
)
from fleet.config import FleetConfig
from fleet.placement import ENTRYPOINT, HEALTH_PATH, METRICS_PATH, NAME, PORT, service_image

COMPONENT = "placement"
REPLICAS = 2
"""Two, so that a rollout or a node drain never leaves the scheduler without the service
(it is ignorable, but then placement falls back to Volcano's own scores meanwhile)."""
SELECTOR = {"app.kubernetes.io/name": NAME}


def declared(fleet: FleetConfig) -> bool:
    """Whether the cluster runs the service: `placement: fgd` with an image, its own or the
    controller's (a `placement_url` names a service that runs elsewhere)."""
    v = fleet.volcano
    return v.placement == "fgd" and image(fleet) is not None and not v.placement_url


def image(fleet: FleetConfig) -> str | None:
    """`volcano.placement_image`, else the controller's image (which carries the service)."""
    return service_image(fleet.volcano.placement_image, fleet.controller.image)


def placement_manifests(fleet: FleetConfig) -> list[Manifest]:
    """The service's objects in the Volcano release's namespace; none unless `declared`."""
    if not declared(fleet):
        return []
    ns = fleet.volcano.namespace
    manifests: list[Manifest] = [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": meta(NAME, ns, component=COMPONENT),
            # It calls nothing: the scheduler sends each task and its candidate nodes.
            "automountServiceAccountToken": False,
        },
        _deployment(fleet),
        service(
            NAME,
            ns,
            component=COMPONENT,
            selector=SELECTOR,
            ports={"http": PORT},
            extra_labels=SELECTOR,
        ),
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": meta(NAME, ns, component=COMPONENT),
            "spec": {"minAvailable": 1, "selector": {"matchLabels": SELECTOR}},
        },
    ]
    settings = fleet.observability
    if settings.prometheus_operator:
        manifests.append(
            {
                "apiVersion": "monitoring.coreos.com/v1",
                "kind": "ServiceMonitor",
                "metadata": meta(
                    NAME, ns, component=COMPONENT, extra_labels={**settings.rule_labels, **SELECTOR}
                ),
                "spec": {
                    "selector": {"matchLabels": SELECTOR},
                    "endpoints": [{"port": "http", "path": METRICS_PATH, "interval": "30s"}],
                },
            }
        )
    return manifests


def _deployment(fleet: FleetConfig) -> Manifest:
    probe: dict[str, Any] = {"httpGet": {"path": HEALTH_PATH, "port": "http"}, "periodSeconds": 10}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(NAME, fleet.volcano.namespace, component=COMPONENT, extra_labels=SELECTOR),
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": SELECTOR},
            "template": {
                "metadata": {"labels": {**common_labels(COMPONENT), **SELECTOR}},
                "spec": {
                    "serviceAccountName": NAME,
                    "automountServiceAccountToken": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "placement",
                            "image": image(fleet),
                            "command": [ENTRYPOINT, f"--port={PORT}"],
                            "ports": [{"name": "http", "containerPort": PORT}],
                            "readinessProbe": probe,
                            "livenessProbe": {**probe, "failureThreshold": 6},
                            # A call over 10,000 nodes is ~1 s of one core (docs/placement.md).
                            "resources": {
                                "requests": {"cpu": "500m", "memory": "256Mi"},
                                "limits": {"memory": "1Gi"},
                            },
                            "securityContext": restricted_container_security_context(),
                        }
                    ],
                },
            },
        },
    }
