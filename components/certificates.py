"""X.509 certificates for the platform, without cert-manager: a private CA and the certificates
it signs (servers, clients). Pure `cryptography`, no Pulumi: the admission gate's TLS bundle
(components/tls.py, at deploy time) and the local fleet's PKI (localfleet/pki.py) are both
built here."""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# The clock of the machine that signs and of the one that checks may differ a little.
CLOCK_SKEW = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class Authority:
    """A CA: its key, its name and its certificate (cryptography objects)."""

    key: Any
    name: Any
    certificate: Any
    not_after: dt.datetime

    @property
    def pem(self) -> str:
        return certificate_pem(self.certificate)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC) - CLOCK_SKEW


def new_authority(common_name: str, *, days: int, path_length: int | None = 0) -> Authority:
    """A self-signed CA valid for `days` (EC P-256), allowed to sign `path_length` levels."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = _now()
    until = now + dt.timedelta(days=days)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=path_length), critical=True)
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
        .sign(key, hashes.SHA256())
    )
    return Authority(key=key, name=name, certificate=certificate, not_after=until)


def alt_name(name: str) -> Any:
    """An address goes in as an IP SAN, anything else as a DNS name."""
    from cryptography import x509

    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def issue(
    ca: Authority,
    *,
    common_name: str,
    server: bool = False,
    client: bool = False,
    alt_names: Sequence[str] = (),
    organization: str | None = None,
) -> tuple[str, str]:
    """A certificate signed by `ca` for a server and/or a client, valid as long as the CA; its
    (certificate PEM, PKCS#8 private key PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] * server + [ExtendedKeyUsageOID.CLIENT_AUTH] * client
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attributes))
        .issuer_name(ca.name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now())
        .not_valid_after(ca.not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    )
    if alt_names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([alt_name(n) for n in alt_names]), critical=False
        )
    return certificate_pem(builder.sign(ca.key, hashes.SHA256())), private_key_pem(key)


def certificate_pem(certificate: Any) -> str:
    from cryptography.hazmat.primitives import serialization

    return str(certificate.public_bytes(serialization.Encoding.PEM).decode())


def private_key_pem(key: Any) -> str:
    from cryptography.hazmat.primitives import serialization

    return str(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
    )


def server_bundle(dns_names: Sequence[str], *, validity_days: int) -> dict[str, str]:
    """A fresh CA and a serving certificate for `dns_names` (the first is the common name):
    {ca_pem, cert_pem, key_pem}."""
    ca = new_authority(f"{dns_names[-1]} CA", days=validity_days)
    cert_pem, key_pem = issue(ca, common_name=dns_names[0], server=True, alt_names=dns_names)
    return {"ca_pem": ca.pem, "cert_pem": cert_pem, "key_pem": key_pem}
