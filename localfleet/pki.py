"""The local control plane's PKI: a CA, the API server's serving certificate, an admin client
certificate (system:masters) and the service-account key, and the admin kubeconfig."""

from __future__ import annotations

import json
from pathlib import Path

from components.certificates import Authority, issue, new_authority, private_key_pem


def write_pki(pki: Path, *, extra_ips: tuple[str, ...] = ()) -> None:
    """CA, apiserver serving cert, admin client cert (system:masters), service-account key.
    extra_ips: more addresses the API server is reached at (its bind address, the `kubernetes`
    Service's ClusterIP)."""
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
            *(ip for ip in extra_ips if ip not in ("127.0.0.1", "10.0.0.1")),
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


def client_certificate(pki: Path, name: str, *, common_name: str, organization: str | None) -> None:
    """A client certificate from the cluster's CA, as `pki/<name>.crt` and `.key` (a kubelet's:
    CN system:node:<node>, O system:nodes; kube-proxy's: CN system:kube-proxy)."""
    ca = _load_authority(pki)
    cert, key = issue(ca, common_name=common_name, organization=organization, client=True)
    for suffix, content in (("crt", cert), ("key", key)):
        path = pki / f"{name}.{suffix}"
        path.write_text(content)
        path.chmod(0o600)


def client_kubeconfig(server: str, pki: Path, name: str) -> str:
    """A kubeconfig for the client certificate `pki/<name>.crt`."""
    config = json.loads(admin_kubeconfig(server, pki))
    config["users"][0]["user"] = {
        "client-certificate": str(pki / f"{name}.crt"),
        "client-key": str(pki / f"{name}.key"),
    }
    return json.dumps(config, indent=2)


def _load_authority(pki: Path) -> Authority:
    """The cluster's CA as `write_pki` left it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    certificate = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None)
    return Authority(
        key=key,
        name=certificate.subject,
        certificate=certificate,
        not_after=certificate.not_valid_after_utc,
    )


def serving_certificate(pki: Path, name: str, alt_names: tuple[str, ...]) -> tuple[str, str]:
    """A serving certificate (PEM) and key signed by the local CA in `pki`, for a server of
    the local control plane that the API server calls (a webhook)."""
    return issue(_load_authority(pki), common_name=name, server=True, alt_names=alt_names)
