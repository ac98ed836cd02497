"""The serving certificate of the OPA admission webhook, without cert-manager.

`TlsBundle` is a Pulumi dynamic resource: at deploy time (not at import, not at preview) its
provider generates a private CA and a serving certificate for the OPA Service with the
`cryptography` package, and Pulumi keeps them in the stack state (the private key as a
secret). Later deployments reuse the state, so the webhook's `caBundle` and the Secret stay
in step; changing the DNS names or the validity replaces both. Rotate with
`pulumi up --replace <urn of the TlsBundle>`.

The provider is serialised into the state by value (Pulumi pickles it with dill): its code is
built inside `_build` so that it does not need this repository on the import path of the
provider process, only `cryptography` and `pulumi`.
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
        import datetime
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
        until = now + datetime.timedelta(days=validity_days)

        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{dns_names[-1]} CA")])
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(until)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(ca_key, hashes.SHA256())
        )

        def alt_name(name: str) -> x509.GeneralName:
            # An address (an OPA on loopback) goes in as an IP SAN, anything else as DNS.
            try:
                return x509.IPAddress(ipaddress.ip_address(name))
            except ValueError:
                return x509.DNSName(name)

        alt_names = [alt_name(n) for n in dns_names]
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0])]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(until)
            .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )

        def pem(c: x509.Certificate) -> str:
            return c.public_bytes(serialization.Encoding.PEM).decode()

        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        return {"ca_pem": pem(ca_cert), "cert_pem": pem(cert), "key_pem": key_pem}

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
