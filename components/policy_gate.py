"""The OPA admission gate: OPA over HTTPS in the cluster (or outside it, at `opa.external_url`),
and a validating webhook scoped to team namespaces."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pulumi

from components.config import FleetConfig
from components.kube import declare_all
from components.manifests import (
    POLICIES_DIR,
    opa_tls_dns_names,
    policy_gate_manifests,
    read_policies,
)
from components.tls import TlsBundle


@dataclass(frozen=True, kw_only=True)
class PolicyGateArgs:
    """fleet: the validated fleet; policies_dir: the Rego sources, read when the program
    runs; provider: the cluster's kubernetes provider; namespace: the system Namespace
    resource, when declared by the caller (objects wait for it)."""

    fleet: FleetConfig
    policies_dir: Path = POLICIES_DIR
    provider: pulumi.ProviderResource | None = None
    namespace: pulumi.Resource | None = None


class PolicyGate(pulumi.ComponentResource):
    """OPA (policies and rendered data as ConfigMaps, a generated serving certificate) and
    its ValidatingWebhookConfiguration.

    The webhook fails closed (`failurePolicy: Fail` by default): in a team namespace nothing
    is admitted unchecked. It only sees namespaces labelled `fleetplane.dev/team`, so the
    platform's own namespaces (and OPA itself) never wait for OPA. `sideEffects: None` keeps
    server-side dry runs possible.
    """

    tls: TlsBundle
    resources: list[pulumi.CustomResource]

    def __init__(
        self, name: str, args: PolicyGateArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("fleetplane:policy:PolicyGate", name, None, opts)
        fleet = args.fleet
        self.tls = TlsBundle(
            f"{name}-tls",
            dns_names=opa_tls_dns_names(fleet),
            validity_days=fleet.opa.cert_validity_days,
            opts=pulumi.ResourceOptions(parent=self),
        )
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        manifests = policy_gate_manifests(
            fleet, read_policies(args.policies_dir), self.tls.material
        )
        namespaces = {fleet.system_namespace: args.namespace} if args.namespace else {}
        body = [m for m in manifests if m["kind"] != "ValidatingWebhookConfiguration"]
        webhook = [m for m in manifests if m["kind"] == "ValidatingWebhookConfiguration"]
        self.resources = declare_all(name, body, child, namespaces=namespaces)
        # Register the webhook only once OPA is serving.
        self.resources += declare_all(
            name,
            webhook,
            pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=self.resources)),
        )
        self.register_outputs(
            {
                "service": f"{fleet.opa.name}.{fleet.system_namespace}.svc",
                "external_url": fleet.opa.external_url,
                "failure_policy": fleet.opa.failure_policy,
            }
        )
