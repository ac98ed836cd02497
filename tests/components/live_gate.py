"""The admission gate as the local stack runs it, on the test control plane: the project's
policies in a real OPA serving HTTPS with the gate's rendered data, authz document and serving
certificate, and the rendered ValidatingWebhookConfiguration calling it (opa.external_url)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from components.platform import render_manifests
from components.tls import generate_tls_bundle
from fleet.config import FleetConfig
from localfleet.controlplane import LocalCluster, free_port
from localfleet.servers import OpaServer


@contextmanager
def live_gate(kube: LocalCluster, fleet: FleetConfig, work: Path) -> Iterator[FleetConfig]:
    """Start the gate's OPA for `fleet` and register its webhook; yields the fleet as
    rendered (OPA outside the cluster, at a free loopback port). The webhook is removed
    afterwards."""
    from components.policy_gate import opa_tls_dns_names
    from components.tls import TlsMaterial

    port = free_port()
    fleet = fleet.model_copy(
        update={
            "opa": fleet.opa.model_copy(
                update={"external_url": f"https://127.0.0.1:{port}", "deploy": False}
            ),
        }
    )
    tls = TlsMaterial(**generate_tls_bundle(dns_names=opa_tls_dns_names(fleet), validity_days=1))
    manifests = render_manifests(fleet, tls=tls)
    by_kind = {(m["kind"], m["metadata"]["name"]): m for m in manifests}
    data = next(m for (k, n), m in by_kind.items() if k == "ConfigMap" and n.endswith("-data"))
    authz = next(
        m
        for (k, _), m in by_kind.items()
        if k == "Secret" and "data.json" in m.get("stringData", {})
    )
    (hook,) = [m for m in manifests if m["kind"] == "ValidatingWebhookConfiguration"]
    (work / "data").mkdir(parents=True)
    (work / "data" / "data.json").write_text(data["data"]["config.json"])
    (work / "tls.crt").write_text(tls.cert_pem)
    (work / "tls.key").write_text(tls.key_pem)
    opa = OpaServer(
        work_dir=work / "opa",
        tls=(work / "tls.crt", work / "tls.key"),
        https_port=port,
        data=(work / "data",),
        authz=json.loads(authz["stringData"]["data.json"]),
    ).start()
    kube.apply([hook])
    try:
        time.sleep(2)  # the API server picks up the new webhook
        yield fleet
    finally:
        kube.kubectl("delete", "validatingwebhookconfiguration", hook["metadata"]["name"])
        opa.stop()


def create(kube: LocalCluster, obj: dict[str, Any], *args: str) -> Any:
    """`kubectl create -f -` of `obj`; the CompletedProcess (check=False)."""
    return kube.kubectl(
        "create", "-f", "-", "-o", "json", *args, input=json.dumps(obj), check=False
    )


@contextmanager
def queue_defaults(kube: LocalCluster, fleet: FleetConfig) -> Iterator[None]:
    """The QueueDefaults policies of `fleet` on `kube`, removed afterwards: the control plane
    is shared by the session's tests, which do not all expect them."""
    from components.queue_defaults import queue_defaults_manifests

    manifests = queue_defaults_manifests(fleet)
    kube.apply(manifests)
    try:
        yield
    finally:
        for m in reversed(manifests):
            kube.kubectl("delete", m["kind"].lower(), m["metadata"]["name"], check=False)
