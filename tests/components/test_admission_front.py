"""The admission front, deployed by the PolicyGate when `opa.admission_front.enabled`: one
replica under a Lease running the controller's image, its own certificate and OPA token, and
the webhook calling it instead of OPA."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.admission_front import FrontMaterial, admission_front_manifests
from components.platform import render_manifests
from components.policy_gate import PolicyGate, PolicyGateArgs, policy_gate_manifests
from components.tls import TlsMaterial
from components.tokens import TokenMaterial
from fleet.config import ConfigError, FleetConfig
from tests.components.component_testkit import CONTROLLER_IMAGE, Declare

FleetFrom = Callable[[Callable[[dict[str, Any]], None] | None], FleetConfig]

FRONT = FrontMaterial(
    tls=TlsMaterial(ca_pem="FRONT-CA", cert_pem="FRONT-CERT", key_pem="FRONT-KEY"),
    token=TokenMaterial(token="FRONT-TOKEN", sha256="a" * 64),
)
GATE_TLS = TlsMaterial(ca_pem="OPA-CA", cert_pem="OPA-CERT", key_pem="OPA-KEY")
CONTROLLER = TokenMaterial(token="CONTROLLER-TOKEN", sha256="c" * 64)


def enabled(raw: dict[str, Any]) -> None:
    raw["opa"]["admission_front"] = {"enabled": True}


def test_the_gate_deploys_the_front_and_the_webhook_calls_it(
    declare: Declare, fleet_from: FleetFrom, tmp_path: Path
) -> None:
    fleet = fleet_from(enabled)
    declared = declare(
        lambda: PolicyGate("prod-opa", PolicyGateArgs(fleet=fleet, policies_dir=tmp_path))
    )
    deployments = {d["metadata"]["name"]: d for d in declared.kind("Deployment")}
    front = deployments["fleetplane-admission-front"]
    assert front["spec"]["replicas"] == 1
    assert front["spec"]["strategy"] == {"type": "Recreate"}
    pod = front["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == CONTROLLER_IMAGE
    command = container["command"]
    assert command[:3] == ["fleetplane", "controller", "admission-front"]
    # every replica of the gate's OPA Service gets each entry; one front at a time
    assert "--opa-service=fleetplane-system/fleetplane-opa" in command
    assert "--opa-url=https://fleetplane-opa.fleetplane-system.svc:443" in command
    assert "--lease=fleetplane-admission-front" in command
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert pod["serviceAccountName"] == "fleetplane-admission-front"
    assert {v["name"]: v for v in pod["volumes"]}["opa-ca"]["configMap"] == {
        "name": "fleetplane-opa-ca"
    }
    (service,) = [
        s for s in declared.kind("Service") if s["metadata"]["name"] == "fleetplane-admission-front"
    ]
    assert service["spec"]["ports"][0]["port"] == 443
    # one replica: a PodDisruptionBudget would leave no eviction of it
    assert all(
        p["spec"]["selector"]["matchLabels"]
        != {"app.kubernetes.io/name": "fleetplane-admission-front"}
        for p in declared.kind("PodDisruptionBudget")
    )
    (webhook_config,) = declared.kind("ValidatingWebhookConfiguration")
    (webhook,) = webhook_config["webhooks"]
    assert webhook["clientConfig"]["service"] == {
        "name": "fleetplane-admission-front",
        "namespace": "fleetplane-system",
        "path": "/",
        "port": 443,
    }
    assert webhook["failurePolicy"] == "Fail"
    # its own certificate (for its Service) and token (role front)
    certificate = declared.one("pulumi-python:dynamic:Resource", "prod-opa-front-tls")
    assert certificate.inputs["dns_names"][1] == "fleetplane-admission-front.fleetplane-system.svc"
    token = declared.one("pulumi-python:dynamic:Resource", "prod-opa-front-token")
    assert token.inputs["role"] == "front"


def test_without_the_front_the_webhook_calls_opa(
    declare: Declare, fleet_from: FleetFrom, tmp_path: Path
) -> None:
    fleet = fleet_from(None)
    assert fleet.opa.admission_front.enabled is False
    declared = declare(
        lambda: PolicyGate("prod-opa", PolicyGateArgs(fleet=fleet, policies_dir=tmp_path))
    )
    assert "fleetplane-admission-front" not in {
        d["metadata"]["name"] for d in declared.kind("Deployment")
    }
    (webhook_config,) = declared.kind("ValidatingWebhookConfiguration")
    assert webhook_config["webhooks"][0]["clientConfig"]["service"]["name"] == "fleetplane-opa"


def test_the_webhook_trusts_the_fronts_ca_and_opa_knows_its_token(fleet_from: FleetFrom) -> None:
    fleet = fleet_from(enabled)
    manifests = policy_gate_manifests(fleet, {}, GATE_TLS, CONTROLLER, front=FRONT)
    (webhook_config,) = [m for m in manifests if m["kind"] == "ValidatingWebhookConfiguration"]
    ca = webhook_config["webhooks"][0]["clientConfig"]["caBundle"]
    assert base64.b64decode(ca).decode() == "FRONT-CA"
    (authz,) = [m for m in manifests if m["metadata"]["name"] == "fleetplane-opa-authz"]
    tokens = json.loads(authz["stringData"]["data.json"])["tokens"]
    assert tokens == {"c" * 64: "controller", "a" * 64: "front"}
    # a new front token rolls OPA, which reads its authz document only at start
    other = FrontMaterial(tls=FRONT.tls, token=TokenMaterial(token="T2", sha256="b" * 64))
    rolled = policy_gate_manifests(fleet, {}, GATE_TLS, CONTROLLER, front=other)
    assert pod_digest(rolled) != pod_digest(manifests)


def test_the_front_may_hold_its_lease_and_find_opas_replicas(fleet_from: FleetFrom) -> None:
    fleet = fleet_from(enabled)
    (role,) = [m for m in admission_front_manifests(fleet, FRONT) if m["kind"] == "Role"]
    assert role["metadata"]["namespace"] == "fleetplane-system"
    granted = {
        (r["resources"][0], v, tuple(r.get("resourceNames", ())))
        for r in role["rules"]
        for v in r["verbs"]
    }
    assert granted == {
        ("leases", "create", ()),
        ("leases", "get", ("fleetplane-admission-front",)),
        ("leases", "patch", ("fleetplane-admission-front",)),
        ("endpointslices", "list", ()),
    }


def test_rendered_manifests_carry_the_front(fleet_from: FleetFrom) -> None:
    kinds = {(m["kind"], m["metadata"]["name"]) for m in render_manifests(fleet_from(enabled))}
    assert ("Deployment", "fleetplane-admission-front") in kinds
    assert ("Secret", "fleetplane-admission-front-token") in kinds


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (
            lambda raw: raw["opa"].update(deploy=False, external_url="https://127.0.0.1:8443"),
            "opa.admission_front.enabled: needs the in-cluster OPA",
        ),
        (
            lambda raw: raw["controller"].update(image=None, suspend=True),
            "opa.admission_front.enabled: needs controller.image",
        ),
    ],
)
def test_the_front_needs_the_in_cluster_opa_and_an_image(
    fleet_from: FleetFrom, edit: Callable[[dict[str, Any]], None], problem: str
) -> None:
    def both(raw: dict[str, Any]) -> None:
        enabled(raw)
        edit(raw)

    with pytest.raises(ConfigError) as caught:
        fleet_from(both)
    assert problem in str(caught.value)


def pod_digest(manifests: list[dict[str, Any]]) -> str:
    (opa,) = [m for m in manifests if m["kind"] == "Deployment"]
    return str(opa["spec"]["template"]["metadata"]["annotations"]["fleetplane.dev/config-sha256"])
