"""PolicyGate: OPA over HTTPS with policies and data from the configuration, and a webhook
that fails closed in every namespace but the platform's own."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from components.policy_gate import PolicyGate, PolicyGateArgs
from fleet.config import ConfigError, FleetConfig
from fleet.opa_shards import SHARDS
from fleet.render import render_approvals, render_opa_data
from tests.components.component_testkit import FAKE_TLS, FAKE_TOKEN, Declare


def write_policies(root: Path) -> Path:
    (root / "fleetplane" / "lib").mkdir(parents=True)
    (root / "system").mkdir()
    (root / "fleetplane" / "lib" / "keys.rego").write_text("package fleetplane.lib\n")
    (root / "fleetplane" / "lib" / "keys_test.rego").write_text("package fleetplane.lib_test\n")
    (root / "system" / "main.rego").write_text("package system\n")
    return root


def test_policy_gate(
    declare: Declare, stack_fleets: dict[str, FleetConfig], tmp_path: Path
) -> None:
    fleet = stack_fleets["prod"]
    policies = write_policies(tmp_path / "policies")
    declared = declare(
        lambda: PolicyGate("prod-opa", PolicyGateArgs(fleet=fleet, policies_dir=policies))
    )

    (webhook_config,) = declared.kind("ValidatingWebhookConfiguration")
    (webhook,) = webhook_config["webhooks"]
    assert webhook["failurePolicy"] == "Fail"
    assert webhook["sideEffects"] == "None"
    assert webhook["admissionReviewVersions"] == ["v1"]
    assert webhook["timeoutSeconds"] == 5
    assert webhook["matchPolicy"] == "Equivalent"
    assert webhook["namespaceSelector"] == {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": fleet.system_namespaces(),
            }
        ]
    }
    assert "default" not in fleet.system_namespaces()
    assert webhook["clientConfig"]["service"] == {
        "name": "fleetplane-opa",
        "namespace": "fleetplane-system",
        "path": "/",
        "port": 443,
    }
    assert base64.b64decode(webhook["clientConfig"]["caBundle"]).decode() == FAKE_TLS["ca_pem"]
    assert all(r["operations"] == ["CREATE", "UPDATE"] for r in webhook["rules"])
    judged = {
        (g, r) for rule in webhook["rules"] for g in rule["apiGroups"] for r in rule["resources"]
    }
    assert judged == {
        ("", "pods"),
        ("", "pods/ephemeralcontainers"),
        ("", "pods/resize"),
        ("", "replicationcontrollers"),
        ("", "replicationcontrollers/scale"),
        ("apps", "deployments"),
        ("apps", "statefulsets"),
        ("apps", "replicasets"),
        ("apps", "daemonsets"),
        ("apps", "deployments/scale"),
        ("apps", "statefulsets/scale"),
        ("apps", "replicasets/scale"),
        ("batch", "jobs"),
        ("batch", "cronjobs"),
        ("autoscaling", "horizontalpodautoscalers"),
        ("batch.volcano.sh", "jobs"),
        ("scheduling.volcano.sh", "podgroups"),
        ("policy", "poddisruptionbudgets"),
        # DRA claims, judged as device requests (issue 30 item 5)
        ("resource.k8s.io", "resourceclaims"),
        ("resource.k8s.io", "resourceclaimtemplates"),
        # What trusted controllers copy from (issue 33): Volcano's and the built-in operators'.
        ("batch.volcano.sh", "cronjobs"),
        ("flow.volcano.sh", "jobtemplates"),
        ("flow.volcano.sh", "jobflows"),
        ("trainer.kubeflow.org", "trainjobs"),
        ("trainer.kubeflow.org", "trainingruntimes"),
        ("ray.io", "rayclusters"),
        ("ray.io", "rayjobs"),
        ("jobset.x-k8s.io", "jobsets"),
        ("leaderworkerset.x-k8s.io", "leaderworkersets"),
        ("leaderworkerset.x-k8s.io", "leaderworkersets/scale"),
    }

    configmaps = {c["metadata"]["name"]: c["data"] for c in declared.kind("ConfigMap")}
    assert configmaps["fleetplane-opa-policies"] == {
        "fleetplane__lib__keys.rego": "package fleetplane.lib\n",
        "system__main.rego": "package system\n",
    }  # tests are not shipped
    data = json.loads(configmaps["fleetplane-opa-data"]["config.json"])
    revision = data["fleetplane"].pop("revision")
    assert data == {
        "fleetplane": {
            "lib": {},  # the anchor of the policies' package (fleet/opa_anchors.py)
            "config": json.loads(json.dumps(render_opa_data(fleet))),
            "approvals": render_approvals(fleet),
        }
    }
    # what OPA loads, named for the decisions that say what gave them (disruption's answers)
    assert len(revision) == 16 and int(revision, 16) >= 0
    assert set(data["fleetplane"]["approvals"]) == {"APR-2026-001", "APR-2026-007"}
    assert configmaps["fleetplane-opa-ca"] == {"ca.crt": FAKE_TLS["ca_pem"]}

    secrets = {s["metadata"]["name"]: s for s in declared.kind("Secret")}
    assert set(secrets) == {
        "fleetplane-opa-tls",
        "fleetplane-opa-authz",
        "fleetplane-opa-controller-token",
    }
    assert secrets["fleetplane-opa-tls"]["type"] == "kubernetes.io/tls"
    assert secrets["fleetplane-opa-tls"]["stringData"]["tls.crt"] == FAKE_TLS["cert_pem"]
    # OPA knows the controller's generated token by its hash; the API server, which sends
    # none on GKE, may only ask for decisions (policies/system/authz.rego)
    assert json.loads(secrets["fleetplane-opa-authz"]["stringData"]["data.json"]) == {
        "tokens": {FAKE_TOKEN["sha256"]: "controller"},
        "anonymous": "webhook",
    }
    assert secrets["fleetplane-opa-controller-token"]["stringData"] == {
        "token": FAKE_TOKEN["token"]
    }
    token = declared.one("pulumi-python:dynamic:Resource", "prod-opa-controller-token")
    assert token.inputs["role"] == "controller"

    (deployment,) = declared.kind("Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 3
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == fleet.opa.image
    assert "@sha256:" in container["image"]
    assert "--tls-cert-file=/certs/tls.crt" in container["args"]
    assert "--addr=0.0.0.0:8443" in container["args"]
    # the kubelet probes the diagnostic port over plain HTTP: it must not inherit the TLS
    assert "--diagnostic-addr=http://0.0.0.0:8282" in container["args"]
    # data kept as AST values: evaluation does not convert the configuration on every lookup
    assert "--optimize-store-for-read-speed" in container["args"]
    # every request is authenticated and authorized; the authz document is loaded at start
    assert {"--authentication=token", "--authorization=basic"} <= set(container["args"])
    assert container["args"][-4:] == ["/policies", "/data", "/authz", "/controller-data"]
    # the spend the controller keeps for a restarted replica: its ConfigMap, not declared
    # here (pulumi up would revert it), so optional until the controller's first pass
    kept_volume = next(v for v in pod["volumes"] if v["name"] == "controller-data")
    sources = kept_volume["projected"]["sources"]
    assert sources[0]["configMap"] == {
        "name": "fleetplane-opa-controller-data",
        "optional": True,
        "items": [
            {"key": "spend.json", "path": "fleetplane/spend/data.json"},
            # merged into the rendered approvals, which carry no uid to conflict with
            {"key": "approval-bindings.json", "path": "fleetplane/approvals/data.json"},
        ],
    }
    # the fleet-sized documents in parts, each its own optional ConfigMap (fleet/opa_shards.py)
    parts = [s["configMap"] for s in sources[1:]]
    assert len(parts) == 2 * SHARDS and all(p["optional"] for p in parts)
    assert parts[0] == {
        "name": "fleetplane-opa-controller-data-reservations-0",
        "optional": True,
        "items": [{"key": "reservations-0.json", "path": "fleetplane/reservations/shard-0.json"}],
    }
    assert parts[-1]["items"] == [
        {
            "key": f"workloads-{SHARDS - 1}.json",
            "path": f"fleetplane/workloads/shard-{SHARDS - 1}.json",
        }
    ]
    assert "fleetplane-opa-controller-data" not in configmaps
    assert render_opa_data(fleet)["controller"]["opa_data_configmap"] == (
        "fleetplane-system/fleetplane-opa-controller-data"
    )
    # no --watch: a watched change rewrites the whole data tree from the files
    assert not any(a.startswith("--watch") for a in container["args"])
    authz_volume = next(v for v in pod["volumes"] if v["name"] == "authz")
    assert authz_volume["secret"] == {
        "secretName": "fleetplane-opa-authz",
        "items": [{"key": "data.json", "path": "fleetplane/authz/data.json"}],
    }
    assert {"name": "authz", "mountPath": "/authz", "readOnly": True} in container["volumeMounts"]
    policy_volume = next(v for v in pod["volumes"] if v["name"] == "policies")
    assert {
        "key": "fleetplane__lib__keys.rego",
        "path": "fleetplane/lib/keys.rego",
    } in policy_volume["configMap"]["items"]
    assert pod["automountServiceAccountToken"] is False
    (service,) = declared.kind("Service")
    assert service["spec"]["ports"][0]["port"] == 443
    assert declared.kind("PodDisruptionBudget")[0]["spec"]["minAvailable"] == 1

    # The serving certificate names the Service, and is generated by a parented dynamic resource.
    tls = declared.one("pulumi-python:dynamic:Resource", "prod-opa-tls").inputs
    assert "fleetplane-opa.fleetplane-system.svc" in tls["dns_names"]
    assert any("PolicyGate$pulumi-python:dynamic:Resource" in u for u in declared.urns)
    assert all("PolicyGate$" in u for u in declared.urns if "::prod-opa-" in u)


def test_failure_policy_follows_the_configuration(
    declare: Declare, fleet_from, tmp_path: Path
) -> None:
    fleet = fleet_from(lambda raw: raw["opa"].update(failure_policy="Ignore", replicas=1))
    declared = declare(
        lambda: PolicyGate("x-opa", PolicyGateArgs(fleet=fleet, policies_dir=tmp_path))
    )
    assert (
        declared.kind("ValidatingWebhookConfiguration")[0]["webhooks"][0]["failurePolicy"]
        == "Ignore"
    )
    assert not declared.kind("PodDisruptionBudget")


def test_gate_of_an_opa_outside_the_cluster(
    declare: Declare, stack_fleets: dict[str, FleetConfig], tmp_path: Path
) -> None:
    """The local stack: no OPA workload in the cluster; policies, data, certificate and a
    webhook that calls the loopback OPA by URL, with a certificate for that address."""
    fleet = stack_fleets["local"]
    assert fleet.opa.external_url == "https://127.0.0.1:8443"
    policies = write_policies(tmp_path / "policies")
    declared = declare(
        lambda: PolicyGate("local-opa", PolicyGateArgs(fleet=fleet, policies_dir=policies))
    )
    kinds = sorted(o["kind"] for o in declared.kubernetes_objects())
    assert kinds == [
        "ConfigMap",
        "ConfigMap",
        "ConfigMap",
        "Secret",
        "Secret",
        "Secret",
        "ValidatingWebhookConfiguration",
    ]
    (webhook_config,) = declared.kind("ValidatingWebhookConfiguration")
    (webhook,) = webhook_config["webhooks"]
    assert webhook["clientConfig"]["url"] == "https://127.0.0.1:8443/"
    assert "service" not in webhook["clientConfig"]
    assert webhook["failurePolicy"] == "Fail"
    bundle = declared.one("pulumi-python:dynamic:Resource", "local-opa-tls")
    assert bundle.inputs["dns_names"] == ["127.0.0.1"]


def test_the_certificate_of_an_address_carries_an_ip_san() -> None:
    from cryptography import x509

    from components.tls import generate_tls_bundle

    material = generate_tls_bundle(dns_names=["127.0.0.1"], validity_days=1)
    cert = x509.load_pem_x509_certificate(material["cert_pem"].encode())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert names.get_values_for_type(x509.DNSName) == []


def opa_container(declared) -> dict:  # type: ignore[no-untyped-def]
    (deployment,) = declared.kind("Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def test_opa_memory_and_its_gc_budget_follow_the_configuration(
    declare: Declare, fleet_from, tmp_path: Path
) -> None:
    """A large fleet's documents need OPA's collector more room (docs/scale.md): the replica's
    memory is the config's, its GOMEMLIMIT three quarters of it; the default renders as before
    (1Gi, 768MiB), so an unchanged fleet's Deployment does not roll."""
    expected = {None: ("1Gi", "768MiB"), 2048: ("2Gi", "1536MiB"), 1536: ("1536Mi", "1152MiB")}
    for memory_mib, (quantity, gc_budget) in expected.items():
        fleet = fleet_from(
            lambda raw, m=memory_mib: raw["opa"].update({} if m is None else {"memory_mib": m})
        )
        declared = declare(
            lambda fleet=fleet: PolicyGate(
                "m-opa", PolicyGateArgs(fleet=fleet, policies_dir=tmp_path)
            )
        )
        container = opa_container(declared)
        assert container["resources"]["requests"]["memory"] == quantity
        assert container["resources"]["limits"]["memory"] == quantity
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env == {"GOGC": "off", "GOMEMLIMIT": gc_budget}


def test_opa_memory_below_what_it_needs_to_start_is_refused(fleet_from) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="memory_mib"):
        fleet_from(lambda raw: raw["opa"].update(memory_mib=256))


def test_revision_names_the_policies_and_data_loaded(
    declare: Declare, stack_fleets: dict[str, FleetConfig], tmp_path: Path
) -> None:
    """`data.fleetplane.revision` changes with a policy's text and with the configuration, and
    not otherwise: the controller asks again about every pod whose kept disruption answer
    another revision gave (controller/decide/disruption_memo.py)."""

    def revision(fleet: FleetConfig, policies: Path) -> str:
        declared = declare(
            lambda: PolicyGate("prod-opa", PolicyGateArgs(fleet=fleet, policies_dir=policies))
        )
        data = {c["metadata"]["name"]: c["data"] for c in declared.kind("ConfigMap")}
        return str(json.loads(data["fleetplane-opa-data"]["config.json"])["fleetplane"]["revision"])

    policies = write_policies(tmp_path / "policies")
    first = revision(stack_fleets["prod"], policies)
    assert revision(stack_fleets["prod"], policies) == first
    (policies / "system" / "main.rego").write_text("package system\n\nx := 1\n")
    edited = revision(stack_fleets["prod"], policies)
    assert edited != first
    assert revision(stack_fleets["dev"], policies) != edited
