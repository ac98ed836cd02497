"""The admission front in the cluster (opt-in: `opa.admission_front.enabled`): where the API
server calls the gate, so that a workload's reservation is written as part of admitting it
(controller/admission_front.py; issue 33, the budget race).

Declared by the PolicyGate, which points its webhook at the front's Service instead of OPA's and
gives the front's token its role in OPA's authz document (policies/system/authz.rego: the
admission decision, the reservation query, one admitted entry at a time).

- One replica, under a Lease. Reviews are judged one at a time so that each sees the entries
  of those before it; two fronts would each judge without the other's entry in flight, so a
  second replica would reopen the race, not add capacity. `Recreate` keeps a rollout from
  running two; the Lease keeps a front that lost touch (its node partitioned, its replacement
  started) from judging beside its successor; the front is ready only while it holds it.
- No PodDisruptionBudget: with one replica, `minAvailable: 1` would leave no eviction of it
  and block every drain of its node (what the gate refuses of tenants); the front comes back
  on another node in seconds, and meanwhile the webhook refuses (`failurePolicy`).
- The controller's image (`controller.image`), by digest: the front is its `admission-front`
  command.
- A serving certificate of its own (the webhook's `caBundle` is its CA) and a bearer token of
  its own for OPA; OPA's CA is the public ConfigMap the gate declares.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import pulumi

from components.kube import (
    CONFIG_HASH_ANNOTATION,
    Manifest,
    common_labels,
    declare_all,
    meta,
    restricted_container_security_context,
    service,
)
from components.tls import TlsBundle, TlsMaterial, generate_tls_bundle, service_dns_names
from components.tokens import BearerToken, TokenMaterial, generate_token
from fleet.config import FleetConfig
from fleet.opa import CONTROLLER_TOKEN_KEY
from fleet.render import OPA_SERVICE_PORT

COMPONENT = "admission-front"
SERVICE_PORT = 443
UNBUILT_IMAGE = "unbuilt/fleetplane-controller:not-deployable"
"""Only when `controller.image` is unset, which the configuration refuses with the front on."""


@dataclass(frozen=True, kw_only=True)
class FrontMaterial:
    """The front's serving certificate (its CA goes into the webhook) and OPA token."""

    tls: TlsMaterial
    token: TokenMaterial


class AdmissionFront(pulumi.ComponentResource):
    """The front's ServiceAccount and RBAC, Secrets, Deployment and Service."""

    tls: TlsBundle
    token: BearerToken
    resources: list[pulumi.CustomResource]

    def __init__(
        self,
        name: str,
        fleet: FleetConfig,
        *,
        provider: pulumi.ProviderResource | None = None,
        namespace: pulumi.Resource | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("fleetplane:policy:AdmissionFront", name, None, opts)
        front = fleet.opa.admission_front
        self.tls = TlsBundle(
            f"{name}-tls",
            dns_names=service_dns_names(front.name, fleet.system_namespace),
            validity_days=fleet.opa.cert_validity_days,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.token = BearerToken(
            f"{name}-token", role="front", opts=pulumi.ResourceOptions(parent=self)
        )
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        namespaces = {fleet.system_namespace: namespace} if namespace else {}
        manifests = admission_front_manifests(fleet, self.material)
        self.resources = declare_all(name, manifests, child, namespaces=namespaces)
        self.register_outputs({"service": f"{front.name}.{fleet.system_namespace}.svc"})

    @property
    def material(self) -> FrontMaterial:
        return FrontMaterial(tls=self.tls.material, token=self.token.material)


def generated_front_material(config: FleetConfig, validity_days: int = 1) -> FrontMaterial:
    """A certificate and token generated here, for manifests rendered outside Pulumi."""
    names = service_dns_names(config.opa.admission_front.name, config.system_namespace)
    return FrontMaterial(
        tls=TlsMaterial(**generate_tls_bundle(dns_names=names, validity_days=validity_days)),
        token=TokenMaterial(**generate_token()),
    )


def webhook_service(config: FleetConfig) -> dict[str, Any]:
    """The webhook's `clientConfig.service` when the front is on: the front's Service."""
    return {
        "name": config.opa.admission_front.name,
        "namespace": config.system_namespace,
        "path": "/",
        "port": SERVICE_PORT,
    }


def front_rbac(config: FleetConfig) -> list[Manifest]:
    """What the front may do in the platform's namespace: hold its own Lease, and list the
    EndpointSlices that name OPA's replicas (RBAC cannot narrow a list to one Service's)."""
    front = config.opa.admission_front
    ns = config.system_namespace
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta(front.name, ns, component=COMPONENT),
            "rules": [
                # `create` cannot be limited by name; reading and renewing are, to its Lease
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "verbs": ["create"],
                },
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "resourceNames": [front.name],
                    "verbs": ["get", "patch"],
                },
                {
                    "apiGroups": ["discovery.k8s.io"],
                    "resources": ["endpointslices"],
                    "verbs": ["list"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta(front.name, ns, component=COMPONENT),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": front.name,
            },
            "subjects": [{"kind": "ServiceAccount", "name": front.name, "namespace": ns}],
        },
    ]


def front_command(config: FleetConfig) -> list[str]:
    """`fleetplane controller admission-front` as the Deployment runs it."""
    front, opa, ns = config.opa.admission_front, config.opa, config.system_namespace
    return [
        "fleetplane",
        "controller",
        "admission-front",
        f"--listen=0.0.0.0:{front.port}",
        "--tls-cert=/certs/tls.crt",
        "--tls-key=/certs/tls.key",
        # the Service's name, which OPA's certificate names, also when writing to pod addresses
        f"--opa-url=https://{opa.name}.{ns}.svc:{OPA_SERVICE_PORT}",
        "--opa-ca=/opa-ca/ca.crt",
        f"--token-file=/token/{CONTROLLER_TOKEN_KEY}",
        f"--opa-service={ns}/{opa.name}",
        f"--lease={front.name}",
        f"--lease-seconds={front.lease_seconds}",
        f"--hold-seconds={front.hold_seconds}",
    ]


def material_digest(material: FrontMaterial) -> Any:
    """A digest of the front's certificate and token (a Pulumi output where they are)."""
    parts = (material.tls.cert_pem, material.token.sha256)

    def digest(values: list[str]) -> str:
        return hashlib.sha256(":".join(values).encode()).hexdigest()

    if any(isinstance(part, pulumi.Output) for part in parts):
        return pulumi.Output.all(*parts).apply(digest)
    return digest(list(parts))


def admission_front_manifests(config: FleetConfig, material: FrontMaterial) -> list[Manifest]:
    """The front's ServiceAccount, Role and RoleBinding, certificate and token Secrets, its
    Deployment (one replica, `Recreate`) and Service."""
    front = config.opa.admission_front
    ns = config.system_namespace
    selector = {"app.kubernetes.io/name": front.name}
    container = {
        "name": "front",
        "image": config.controller.image or UNBUILT_IMAGE,
        "command": front_command(config),
        "env": [
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
            }
        ],
        "ports": [{"name": "https", "containerPort": front.port, "protocol": "TCP"}],
        # ready only while it holds its Lease (and so may judge)
        "readinessProbe": {
            "httpGet": {"path": "/healthz", "port": "https", "scheme": "HTTPS"},
            "periodSeconds": 5,
        },
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"memory": "512Mi"},
        },
        "securityContext": restricted_container_security_context(),
        "volumeMounts": [
            {"name": "certs", "mountPath": "/certs", "readOnly": True},
            {"name": "token", "mountPath": "/token", "readOnly": True},
            {"name": "opa-ca", "mountPath": "/opa-ca", "readOnly": True},
        ],
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": meta(front.name, ns, component=COMPONENT),
        },
        *front_rbac(config),
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": meta(f"{front.name}-tls", ns, component=COMPONENT),
            "type": "kubernetes.io/tls",
            "stringData": {"tls.crt": material.tls.cert_pem, "tls.key": material.tls.key_pem},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": meta(f"{front.name}-token", ns, component=COMPONENT),
            "type": "Opaque",
            "stringData": {CONTROLLER_TOKEN_KEY: material.token.token},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta(front.name, ns, component=COMPONENT, extra_labels=selector),
            "spec": {
                "replicas": 1,
                # never two fronts at once during a rollout: the old one stops, then the new
                # starts (and takes the Lease the old one gave back)
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {
                        "labels": {**common_labels(COMPONENT), **selector},
                        # it reads its certificate and token at start: a new one rolls it
                        "annotations": {CONFIG_HASH_ANNOTATION: material_digest(material)},
                    },
                    "spec": {
                        "serviceAccountName": front.name,
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [container],
                        "volumes": [
                            {"name": "certs", "secret": {"secretName": f"{front.name}-tls"}},
                            {"name": "token", "secret": {"secretName": f"{front.name}-token"}},
                            {"name": "opa-ca", "configMap": {"name": f"{config.opa.name}-ca"}},
                        ],
                    },
                },
            },
        },
        service(
            front.name,
            ns,
            component=COMPONENT,
            selector=selector,
            ports={"https": SERVICE_PORT},
            protocol="TCP",
        ),
    ]
