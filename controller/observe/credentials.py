"""Where the controller's Kubernetes credentials come from: `--kubeconfig`, the in-cluster
service account, or $KUBECONFIG / ~/.kube/config (`resolve_credentials`)."""

from __future__ import annotations

import base64
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from controller.errors import PermanentError

IN_CLUSTER_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True, kw_only=True)
class Credentials:
    server: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None
    insecure: bool = False


def _materialise(data_b64: str, suffix: str) -> str:
    """Kubeconfig `*-data` fields are inline PEM; requests wants files."""
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - lives as long as the process
        prefix="fleetplane-", suffix=suffix, delete=False
    )
    handle.write(base64.b64decode(data_b64))
    handle.close()
    os.chmod(handle.name, 0o600)
    return handle.name


def credentials_from_kubeconfig(path: Path, context: str | None = None) -> Credentials:
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise PermanentError(f"kubeconfig {path}: {error}") from error
    name = context or document.get("current-context")
    contexts = {c["name"]: c["context"] for c in document.get("contexts") or []}
    if name not in contexts:
        raise PermanentError(f"kubeconfig {path}: no context {name!r}")
    ctx = contexts[name]
    cluster = {c["name"]: c["cluster"] for c in document.get("clusters") or []}[ctx["cluster"]]
    user = {u["name"]: u["user"] for u in document.get("users") or []}.get(ctx.get("user"), {})
    base = path.parent

    def file_of(entry: dict[str, Any], key: str, suffix: str) -> str | None:
        if entry.get(f"{key}-data"):
            return _materialise(entry[f"{key}-data"], suffix)
        if entry.get(key):
            return str((base / entry[key]).resolve())
        return None

    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = Path(user["tokenFile"]).read_text().strip()
    return Credentials(
        server=cluster["server"].rstrip("/"),
        ca_file=file_of(cluster, "certificate-authority", ".crt"),
        cert_file=file_of(user, "client-certificate", ".crt"),
        key_file=file_of(user, "client-key", ".key"),
        token=token,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
    )


def in_cluster_credentials() -> Credentials | None:
    host, port = (
        os.environ.get("KUBERNETES_SERVICE_HOST"),
        os.environ.get("KUBERNETES_SERVICE_PORT"),
    )
    token = IN_CLUSTER_DIR / "token"
    if not host or not port or not token.exists():
        return None
    if ":" in host:
        host = f"[{host}]"
    return Credentials(
        server=f"https://{host}:{port}",
        ca_file=str(IN_CLUSTER_DIR / "ca.crt"),
        token=token.read_text().strip(),
    )


def resolve_credentials(kubeconfig: str | None) -> Credentials:
    """--kubeconfig if given; else the in-cluster service account; else $KUBECONFIG or
    ~/.kube/config."""
    if kubeconfig:
        return credentials_from_kubeconfig(Path(kubeconfig))
    found = in_cluster_credentials()
    if found is not None:
        return found
    path = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or str(
        Path.home() / ".kube" / "config"
    )
    if not Path(path).exists():
        raise PermanentError(
            "no Kubernetes credentials: not in a cluster, and no --kubeconfig or $KUBECONFIG"
        )
    return credentials_from_kubeconfig(Path(path))
