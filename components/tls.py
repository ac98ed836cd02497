"""The serving certificate of the OPA admission webhook, without cert-manager.

`TlsBundle` is a Pulumi dynamic resource: at deploy time (not at import, not at preview) its
provider generates a private CA and a serving certificate for the OPA Service with the
`cryptography` package, and Pulumi keeps them in the stack state (the private key as a
secret). Later deployments reuse the state, so the webhook's `caBundle` and the Secret stay
in step; changing the DNS names or the validity replaces both. Rotate with
`pulumi up --replace <urn of the TlsBundle>`.

The provider is serialised into the state by value (Pulumi pickles it with dill): its code is
built inside `_build`, and it imports the certificate builder (components/certificates.py, the
one the local fleet's PKI uses too) when it runs, from the fleetplane installed in the
program's environment.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi.dynamic


@dataclass(frozen=True, kw_only=True)
class TlsMaterial:
    """PEM texts (or Pulumi outputs of them) of a CA and a serving certificate signed by it."""

    ca_pem: Any
    cert_pem: Any
    key_pem: Any


def service_dns_names(name: str, namespace: str) -> list[str]:
    """The names a client may use for a Service, most specific first."""
    return [
        f"{name}.{namespace}.svc.cluster.local",
        f"{name}.{namespace}.svc",
        f"{name}.{namespace}",
        name,
    ]


def _build() -> tuple[Callable[..., dict[str, str]], type[pulumi.dynamic.ResourceProvider]]:
    def generate(*, dns_names: Sequence[str], validity_days: int) -> dict[str, str]:
        # Imported when the provider runs: the provider process has fleetplane installed, as
        # the program's does.
        from components.certificates import server_bundle

        return server_bundle(dns_names, validity_days=validity_days)

    class Provider(pulumi.dynamic.ResourceProvider):
        inputs = ("dns_names", "validity_days")

        def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
            import hashlib

            from pulumi.dynamic import CreateResult

            material = generate(
                dns_names=list(props["dns_names"]), validity_days=int(props["validity_days"])
            )
            digest = hashlib.sha256(material["cert_pem"].encode()).hexdigest()[:16]
            return CreateResult(id_=digest, outs={**props, **material})

        def diff(
            self, _id: str, olds: dict[str, Any], news: dict[str, Any]
        ) -> pulumi.dynamic.DiffResult:
            from pulumi.dynamic import DiffResult

            changed = [
                k
                for k in ("dns_names", "validity_days")
                if _normalise(olds.get(k)) != _normalise(news.get(k))
            ]
            return DiffResult(changes=bool(changed), replaces=changed, delete_before_replace=False)

    def _normalise(value: Any) -> Any:
        if isinstance(value, list | tuple):
            return [str(v) for v in value]
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value

    return generate, Provider


generate_tls_bundle, TlsBundleProvider = _build()
"""`generate_tls_bundle(dns_names=..., validity_days=...)` -> {ca_pem, cert_pem, key_pem}."""


class TlsBundle(pulumi.dynamic.Resource):
    """A CA and a serving certificate for `dns_names` (IP addresses among them become IP
    SANs), generated once and kept in the state."""

    ca_pem: pulumi.Output[str]
    cert_pem: pulumi.Output[str]
    key_pem: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        dns_names: Sequence[str],
        validity_days: int,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(
            TlsBundleProvider(),
            name,
            {
                "dns_names": list(dns_names),
                "validity_days": validity_days,
                "ca_pem": None,
                "cert_pem": None,
                "key_pem": None,
            },
            pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(additional_secret_outputs=["key_pem"])
            ),
        )

    @property
    def material(self) -> TlsMaterial:
        return TlsMaterial(ca_pem=self.ca_pem, cert_pem=self.cert_pem, key_pem=self.key_pem)
