"""A team namespace of its own behind the gate's webhook on a real OPA over HTTPS, for the
tests that send objects through the real path: the pinned API server calls the webhook (its
rules as `components.policy_gate.webhook_rules` generates them from the fleet configuration)
with the project's policies and the policy review corpus's configuration. The webhook
matches that namespace only (the API server is shared with other suites)."""

from __future__ import annotations

import base64
import copy
import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from components.certificates import server_bundle
from components.policy_gate import webhook_rules
from controller.admission_front import AdmissionFront, serve
from controller.observe.endpoints import Endpoint
from fleet.config import parse_fleet
from localfleet.controlplane import LocalCluster
from localfleet.servers import OpaServer
from tests.components.component_testkit import minimal_raw_fleet
from tests.policies.conftest import fixture_approvals

CORPUS_CONFIG = Path(__file__).parents[2] / "policyreview/corpus/config.json"


@contextmanager
def gated_namespace(
    kube: LocalCluster,
    work: Path,
    prefix: str,
    *,
    front: bool = False,
    replicas: list[OpaServer] | None = None,
    data: Callable[[str], dict[str, Any]] | None = None,
) -> Iterator[str]:
    """A new namespace of the team `research` behind the gate; removed on exit. With `front`,
    the webhook calls the admission front (controller/admission_front.py) before OPA. With
    `replicas` (a list, filled here with the gate's OPA servers) the gate has a second OPA
    replica, with the same data, that the front does not ask but writes each entry to, as to
    every replica of the gate's Service. `data` gives more OPA documents (path -> document)
    for the new namespace's name."""
    pem = server_bundle(["127.0.0.1"], validity_days=1)
    files = {}
    for key, name in (("cert_pem", "tls.crt"), ("key_pem", "tls.key")):
        files[name] = work / name
        files[name].write_text(pem[key])
    opa = OpaServer(work_dir=work / "opa", tls=(files["tls.crt"], files["tls.key"])).start()
    namespace = f"{prefix}-{uuid.uuid4().hex[:8]}"
    config = json.loads(CORPUS_CONFIG.read_text())
    config["namespaces"][namespace] = "research"
    config["teams"]["research"]["namespaces"].append(namespace)
    opa.put_data("fleetplane/config", config)
    opa.put_data("fleetplane/approvals", fixture_approvals())
    opa.put_data("fleetplane/spend", {})
    extra = data(namespace) if data else {}
    for path, document in extra.items():
        opa.put_data(path, document)
    fleet = parse_fleet(copy.deepcopy(minimal_raw_fleet()))
    kube.kubectl("create", "namespace", namespace)
    name = f"{prefix}-gate-{namespace}"
    hook = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "admission.fleetplane.dev",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "timeoutSeconds": 10,
                "failurePolicy": "Fail",
                "matchPolicy": "Equivalent",
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "rules": webhook_rules(fleet),
                "clientConfig": {
                    "url": f"{opa.https_url}/",
                    "caBundle": base64.b64encode(pem["ca_pem"].encode()).decode(),
                },
            }
        ],
    }
    servers = [opa]
    if replicas is not None:
        second = OpaServer(work_dir=work / "opa-2").start()
        for path in ("fleetplane/config", "fleetplane/approvals", "fleetplane/spend", *extra):
            second.put_data(path, opa.query(path))
        servers.append(second)
        replicas[:] = servers
    server = None
    if front:
        every = [Endpoint("127.0.0.1", s.port) for s in servers]
        server = serve(
            AdmissionFront(opa.url, replicas=lambda: every),
            "127.0.0.1",
            0,
            tls=(files["tls.crt"], files["tls.key"]),
        )
        hook["webhooks"][0]["clientConfig"]["url"] = (
            f"https://127.0.0.1:{server.server_address[1]}/"
        )
    kube.apply([hook])
    try:
        time.sleep(2)  # the API server picks up the new webhook
        yield namespace
    finally:
        kube.kubectl("delete", "validatingwebhookconfiguration", name, check=False)
        kube.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        if server is not None:
            server.shutdown()
        for each in servers:
            each.stop()


def create(kube: LocalCluster, namespace: str, obj: dict[str, Any]) -> Any:
    """`kubectl create` of obj in namespace; the completed process (not checked)."""
    return kube.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(obj), check=False)
