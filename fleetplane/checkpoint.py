"""Record a checkpoint on the running pod, for the platform's drains to read.

A training job calls `record()` (or runs `fleetplane checkpoint`) right after it has written a
checkpoint. The pod's annotation `fleetplane.dev/last-checkpoint` then holds the time in epoch
seconds: preemption picks the victim with the least work to lose by it, and the max-runtime,
upgrade and health drains count the work at risk from it (controller/nodeflow/pods.py reads it).

Dependency-free on purpose (the standard library only): it runs inside the team's own image.
It talks to the API server as the pod's ServiceAccount (its mounted token and CA) and sends one
JSON merge patch of that annotation, which the team's ServiceAccounts are allowed
(components.tenancy grants `patch` on pods in the team's namespaces, nothing else); the
admission gate refuses any other platform-owned key they would write with it.

The pod's identity comes from the downward API; add to the container:

    env:
      - name: POD_NAME
        valueFrom: {fieldRef: {fieldPath: metadata.name}}
      - name: POD_NAMESPACE
        valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ANNOTATION = "fleetplane.dev/last-checkpoint"
"""The annotation the drains read (fleet.labels.LAST_CHECKPOINT), in epoch seconds."""

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where the kubelet mounts the pod's ServiceAccount token and the cluster's CA."""


class CheckpointError(RuntimeError):
    """The checkpoint could not be recorded (no pod identity, no token, or refused)."""


@dataclass(frozen=True)
class InCluster:
    """Where and as whom to call the API server: by default, from the pod's environment
    (KUBERNETES_SERVICE_HOST/PORT, the mounted ServiceAccount token and CA, POD_NAME and
    POD_NAMESPACE from the downward API)."""

    server: str
    token: str
    ca_file: str | None
    namespace: str
    pod: str

    @classmethod
    def from_environment(cls, service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> InCluster:
        env = os.environ
        host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
        server = env.get("FLEETPLANE_API_SERVER") or (
            f"https://{_host(host)}:{port}" if host and port else ""
        )
        pod = env.get("POD_NAME") or ""
        namespace = env.get("POD_NAMESPACE") or _read(service_account_dir / "namespace")
        token_file = service_account_dir / "token"
        missing = [
            what
            for what, value in (
                ("the API server (KUBERNETES_SERVICE_HOST/PORT)", server),
                ("the pod's name (POD_NAME, from the downward API)", pod),
                ("the pod's namespace (POD_NAMESPACE)", namespace),
            )
            if not value
        ]
        if not token_file.is_file():
            missing.append(f"the ServiceAccount token ({token_file})")
        if missing:
            raise CheckpointError("cannot record a checkpoint without " + "; ".join(missing))
        ca = service_account_dir / "ca.crt"
        return cls(
            server=server.rstrip("/"),
            token=token_file.read_text().strip(),
            ca_file=str(ca) if ca.is_file() else None,
            namespace=namespace,
            pod=pod,
        )


def _host(host: str | None) -> str:
    return f"[{host}]" if host and ":" in host else str(host)


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def annotation_value(at: float) -> str:
    """The annotation's value: whole epoch seconds (the drains refuse milliseconds, a future
    time or a non-number as no checkpoint at all)."""
    return str(int(at))


def merge_patch(at: float) -> bytes:
    """The JSON merge patch (RFC 7386) that sets the annotation and touches nothing else."""
    return json.dumps({"metadata": {"annotations": {ANNOTATION: annotation_value(at)}}}).encode()


def record(
    at: float | None = None, *, where: InCluster | None = None, timeout: float = 10.0
) -> str:
    """Record a checkpoint taken at `at` (default: now) on this pod; returns the value written.
    Raises CheckpointError when the API server refuses it or cannot be reached."""
    target = where or InCluster.from_environment()
    value = annotation_value(time.time() if at is None else at)
    url = (
        f"{target.server}/api/v1/namespaces/{urllib.parse.quote(target.namespace)}"
        f"/pods/{urllib.parse.quote(target.pod)}"
    )
    request = urllib.request.Request(
        url,
        data=merge_patch(float(value)),
        method="PATCH",
        headers={
            "Authorization": f"Bearer {target.token}",
            "Content-Type": "application/merge-patch+json",
            "Accept": "application/json",
        },
    )
    context = ssl.create_default_context(cafile=target.ca_file)
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as answer:
            answer.read()
    except urllib.error.HTTPError as error:
        detail = error.read().decode(errors="replace")
        with contextlib.suppress(ValueError):
            detail = json.loads(detail).get("message", detail)
        raise CheckpointError(
            f"recording the checkpoint on {target.namespace}/{target.pod} was refused "
            f"({error.code}): {detail}"
        ) from error
    except (urllib.error.URLError, OSError) as error:
        raise CheckpointError(f"cannot reach the API server at {target.server}: {error}") from error
    return value
