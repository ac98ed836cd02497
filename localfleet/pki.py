"""The local control plane's PKI: a CA, the API server's serving certificate, an admin client
certificate (system:masters) and the service-account key, and the admin kubeconfig."""

from __future__ import annotations

import json
from pathlib import Path

from components.certificates import issue, new_authority, private_key_pem


def write_pki(pki: Path) -> None:
    """CA, apiserver serving cert, admin client cert (system:masters), service-account key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    pki.mkdir(parents=True, exist_ok=True)
    ca = new_authority("fleetplane-local-ca", days=365, path_length=None)
    serving_cert, serving_key = issue(
        ca,
        common_name="kube-apiserver",
        server=True,
        alt_names=(
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "127.0.0.1",
            "::1",
            "10.0.0.1",
        ),
    )
    admin_cert, admin_key = issue(
        ca, common_name="admin", organization="system:masters", client=True
    )
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    files = {
        "ca.crt": ca.pem,
        "ca.key": private_key_pem(ca.key),
        "apiserver.crt": serving_cert,
        "apiserver.key": serving_key,
        "admin.crt": admin_cert,
        "admin.key": admin_key,
        "sa.key": private_key_pem(sa_key),
        "sa.pub": sa_key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode(),
    }
    for name, content in files.items():
        path = pki / name
        path.write_text(content)
        path.chmod(0o600)


def admin_kubeconfig(server: str, pki: Path) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "fleetplane-local",
                    "cluster": {"server": server, "certificate-authority": str(pki / "ca.crt")},
                }
            ],
            "users": [
                {
                    "name": "admin",
                    "user": {
                        "client-certificate": str(pki / "admin.crt"),
                        "client-key": str(pki / "admin.key"),
                    },
                }
            ],
            "contexts": [
                {
                    "name": "fleetplane-local",
                    "context": {"cluster": "fleetplane-local", "user": "admin"},
                }
            ],
            "current-context": "fleetplane-local",
        },
        indent=2,
    )
