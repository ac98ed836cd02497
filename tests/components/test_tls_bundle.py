"""The OPA serving certificate: a valid chain for the Service names, and a dynamic provider
that works in Pulumi's provider process (no repository on its import path)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from pulumi.dynamic.dynamic import serialize_provider

from components.tls import TlsBundleProvider, generate_tls_bundle, service_dns_names


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
    serialized = serialize_provider(TlsBundleProvider())
    script = textwrap.dedent(
        """
        import base64, sys, dill
        assert not any(p.endswith("/main") for p in sys.path), sys.path
        provider = dill.loads(base64.b64decode(sys.stdin.read()))
        result = provider.create({"dns_names": ["opa.ns.svc", "opa"], "validity_days": 2})
        assert result.outs["cert_pem"].startswith("-----BEGIN CERTIFICATE-----")
        assert result.outs["dns_names"] == ["opa.ns.svc", "opa"]
        same = provider.diff(result.id, result.outs, {"dns_names": ["opa.ns.svc", "opa"], "validity_days": 2.0})
        assert not same.changes
        renamed = provider.diff(result.id, result.outs, {"dns_names": ["x"], "validity_days": 2})
        assert renamed.changes and renamed.replaces == ["dns_names"]
        print("ok")
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=serialized,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
