"""The OPA serving certificate: a valid chain for the Service names, and a dynamic provider
that works in Pulumi's provider process (no repository on its import path)."""

from __future__ import annotations

from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from components.tls import TlsBundleProvider, generate_tls_bundle, service_dns_names
from tests.components.component_testkit import run_provider_outside_the_repository


def test_bundle_is_a_ca_and_a_serving_certificate_it_signed() -> None:
    names = service_dns_names("fleetplane-opa", "fleetplane-system")
    bundle = generate_tls_bundle(dns_names=names, validity_days=30)
    ca = x509.load_pem_x509_certificate(bundle["ca_pem"].encode())
    cert = x509.load_pem_x509_certificate(bundle["cert_pem"].encode())

    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert cert.issuer == ca.subject
    public_key = ca.public_key()
    assert isinstance(public_key, ec.EllipticCurvePublicKey)
    assert cert.signature_hash_algorithm is not None
    public_key.verify(
        cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm)
    )
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == names
    assert "fleetplane-opa.fleetplane-system.svc" in names
    assert (cert.not_valid_after_utc - cert.not_valid_before_utc).days == 30
    assert "PRIVATE KEY" in bundle["key_pem"]


def test_provider_runs_without_the_repository_on_the_path(tmp_path: Path) -> None:
    run_provider_outside_the_repository(
        TlsBundleProvider(),
        """
        result = provider.create({"dns_names": ["opa.ns.svc", "opa"], "validity_days": 2})
        assert result.outs["cert_pem"].startswith("-----BEGIN CERTIFICATE-----")
        assert result.outs["dns_names"] == ["opa.ns.svc", "opa"]
        same = provider.diff(result.id, result.outs, {"dns_names": ["opa.ns.svc", "opa"], "validity_days": 2.0})
        assert not same.changes
        renamed = provider.diff(result.id, result.outs, {"dns_names": ["x"], "validity_days": 2})
        assert renamed.changes and renamed.replaces == ["dns_names"]
        print("ok")
        """,
        tmp_path,
    )
