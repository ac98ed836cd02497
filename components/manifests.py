"""Every Kubernetes object of the platform, as plain manifests derived from the configuration.

Pure functions: no Pulumi resources, no cluster access. The components declare exactly these
manifests (`components.kube.declare`), the unit tests assert on them, and
`render_manifests` hands the full list to a server-side dry run against a real API server.
Values that only exist at deploy time (the generated TLS material) may be Pulumi outputs
inside the dicts; Pulumi resolves them when the component declares the object.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pulumi
import yaml

from components import labels
from components.config import FleetConfig, TeamConfig
from components.render import (
    CONFIG_ENV,
    CONFIG_FILE,
    CONFIG_MOUNT,
    OPA_CA_MOUNT,
    OPA_SERVICE_PORT,
    render_opa_data,
)
from components.tls import TlsMaterial, generate_tls_bundle, service_dns_names

Manifest = dict[str, Any]

REPO_ROOT = Path(__file__).resolve().parent.parent
POLICIES_DIR = REPO_ROOT / "policies"

CONTROLLER_NAME = "fleetplane-controller"
OPA_DIAGNOSTIC_PORT = 8282

OPA_GC_ENV = {"GOGC": "off", "GOMEMLIMIT": "768MiB"}
"""Go GC settings of OPA: collect by memory budget, not by heap growth. An admission decision
allocates 100-200 kB that is garbage as soon as it is answered, over a live heap of a few tens
of MB; with Go's default (GOGC=100) the collector ran every few hundred decisions and took about
a third of OPA's CPU. With GOGC=off the heap grows to GOMEMLIMIT (768 MiB, under the
container's 1 GiB, whose memory request is the same 1 GiB so the budget is reserved on the node)
and the collector runs only there, tracing just the live heap: admission throughput on 2 cores
went from 1,287 to 1,807 decisions/s (GOGC=400: 1,472; 1600: 1,686; bench/opa_admission.py,
machine idle). Go still collects as often as it must to stay under the limit, its collector
capped at half the CPU if the live heap itself ever approached it."""
OPA_RUN_FLAGS = ("--optimize-store-for-read-speed",)
"""`opa run` flags every OPA of the project gets (the in-cluster Deployment, the local stack, the
test server and the benchmark). The store keeps data as the AST values evaluation reads, so a
decision no longer converts `data.fleetplane.config` from raw JSON on every lookup: an admission
decision went from 1,507 to 1,350 allocations and the gate's throughput on 2 cores from 1,874 to
2,267-2,306 decisions/s (bench/opa_admission.py, machine idle). Data written over the REST API (the
controller's spend document) is converted once, on write."""
CONFIGMAP_LIMIT_BYTES = 900 * 1024
"""Stay well below the 1 MiB object size limit of etcd."""


def common_labels(component: str) -> dict[str, str]:
    return {
        labels.MANAGED_BY: labels.MANAGED_BY_VALUE,
        "app.kubernetes.io/part-of": "fleetplane",
        "app.kubernetes.io/component": component,
    }


def _meta(
    name: str,
    namespace: str | None = None,
    *,
    component: str,
    extra_labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = {**common_labels(component), **(extra_labels or {})}
    if annotations:
        meta["annotations"] = annotations
    return meta


def resource_slug(resource: str) -> str:
    """`nvidia.com/gpu` -> `nvidia-com-gpu`, for object names."""
    return re.sub(r"[^a-z0-9]+", "-", resource.lower()).strip("-")


# ---------------------------------------------------------------------------------------------
# Cluster-wide
# ---------------------------------------------------------------------------------------------


def system_namespace(config: FleetConfig) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": _meta(config.system_namespace, component="system"),
    }


def priority_classes(config: FleetConfig) -> list[Manifest]:
    """One PriorityClass per class of every workload type (cluster-scoped, shared by teams)."""
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": _meta(
                pc.name,
                component="workload-classes",
                extra_labels={labels.WORKLOAD_TYPE: type_name},
            ),
            "value": pc.value,
            "preemptionPolicy": pc.preemption_policy,
            "globalDefault": False,
            "description": pc.description or f"fleetplane {type_name} workloads",
        }
        for type_name, wt in config.workload_types.items()
        for pc in wt.priority_classes
    ]


VOLCANO_CRDS = Path(__file__).resolve().parent / "crds" / "volcano.yaml"
"""Volcano's CustomResourceDefinitions for clusters without the Volcano chart (offline)."""


def volcano_crds(path: Path = VOLCANO_CRDS) -> list[Manifest]:
    """The CRDs of the Volcano kinds the platform declares, reads and writes (Queue, PodGroup,
    Job, Command)."""
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def volcano_queues(config: FleetConfig) -> list[Manifest]:
    """One Volcano Queue per team: weight, capability (quota), guarantee, reclaimable."""
    resources = config.accelerator_resources()
    queues = []
    for team in config.teams:
        spec: dict[str, Any] = {
            "weight": team.queue_weight,
            "reclaimable": team.reclaimable,
            "capability": {r: str(team.quota.get(r, 0)) for r in resources},
        }
        guarantee = {r: str(n) for r, n in team.guaranteed.items() if n > 0}
        if guarantee:
            spec["guarantee"] = {"resource": guarantee}
        queues.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": _meta(
                    team.name, component="volcano", extra_labels={labels.TEAM: team.name}
                ),
                "spec": spec,
            }
        )
    return queues


# ---------------------------------------------------------------------------------------------
# Teams
# ---------------------------------------------------------------------------------------------


def team_manifests(config: FleetConfig, team: TeamConfig) -> list[Manifest]:
    """Namespaces, accelerator quotas, container defaults and RBAC of one team."""
    out: list[Manifest] = []
    resources = config.accelerator_resources()
    team_label = {labels.TEAM: team.name}
    for ns in team.effective_namespaces:
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": _meta(
                    ns,
                    component="tenancy",
                    extra_labels=team_label,
                    annotations={labels.VOLCANO_QUEUE_NAME: team.name},
                ),
            }
        )
        for resource in resources:
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "ResourceQuota",
                    "metadata": _meta(
                        f"accelerators-{resource_slug(resource)}",
                        ns,
                        component="tenancy",
                        extra_labels=team_label,
                    ),
                    "spec": {"hard": {f"requests.{resource}": str(team.quota.get(resource, 0))}},
                }
            )
        defaults = team.container_defaults
        # CPU and memory only: a LimitRange max on an extended resource would make every
        # container declare a limit for it. Per-workload accelerator limits are OPA's.
        out.append(
            {
                "apiVersion": "v1",
                "kind": "LimitRange",
                "metadata": _meta(
                    "container-defaults", ns, component="tenancy", extra_labels=team_label
                ),
                "spec": {
                    "limits": [
                        {
                            "type": "Container",
                            "defaultRequest": {
                                "cpu": defaults.cpu_request,
                                "memory": defaults.memory_request,
                            },
                            "default": {
                                "cpu": defaults.cpu_limit,
                                "memory": defaults.memory_limit,
                            },
                        }
                    ]
                },
            }
        )
        if team.groups:
            out.append(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": _meta(
                        "team-members", ns, component="tenancy", extra_labels=team_label
                    ),
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": "edit",
                    },
                    "subjects": [
                        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}
                        for g in team.groups
                    ],
                }
            )
    return out


# ---------------------------------------------------------------------------------------------
# OPA admission gate
# ---------------------------------------------------------------------------------------------


def read_policies(policies_dir: Path = POLICIES_DIR) -> dict[str, str]:
    """Rego sources under `policies_dir` (tests excluded), by path relative to it."""
    if not policies_dir.is_dir():
        return {}
    return {
        path.relative_to(policies_dir).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(policies_dir.rglob("*.rego"))
        if not path.name.endswith("_test.rego")
    }


def policy_configmap_key(relative_path: str) -> str:
    """ConfigMap keys cannot hold `/`: `fleetplane/lib/keys.rego` -> `fleetplane__lib__keys.rego`."""
    return relative_path.replace("/", "__")


def _b64(value: Any) -> Any:
    encode = lambda text: base64.b64encode(text.encode()).decode()  # noqa: E731
    return value.apply(encode) if isinstance(value, pulumi.Output) else encode(value)


def opa_tls_dns_names(config: FleetConfig) -> list[str]:
    """Names in OPA's serving certificate: the in-cluster Service's, or the external URL's host."""
    if config.opa.external_host is not None:
        return [config.opa.external_host]
    return service_dns_names(config.opa.name, config.system_namespace)


def webhook_client_config(config: FleetConfig, ca_bundle: Any) -> dict[str, Any]:
    """Where the API server sends AdmissionReviews: the OPA Service, or the external URL."""
    opa = config.opa
    if opa.external_url is not None:
        url = opa.external_url.rstrip("/") + "/" + opa.webhook_path.lstrip("/")
        return {"url": url, "caBundle": ca_bundle}
    return {
        "service": {
            "name": opa.name,
            "namespace": config.system_namespace,
            "path": opa.webhook_path,
            "port": OPA_SERVICE_PORT,
        },
        "caBundle": ca_bundle,
    }


def webhook_namespace_selector() -> dict[str, Any]:
    """The webhook sees team namespaces only (those labelled with their team)."""
    return {"matchExpressions": [{"key": labels.TEAM, "operator": "Exists"}]}


def policy_gate_manifests(
    config: FleetConfig, policies: dict[str, str], tls: TlsMaterial
) -> list[Manifest]:
    """OPA Deployment and Service (HTTPS), its policies and data, and the validating webhook.

    With `opa.external_url` (OPA outside the cluster) there is no ServiceAccount, Deployment,
    Service or PodDisruptionBudget: the policies, data and serving certificate are declared for
    the OPA that runs elsewhere to load, and the webhook calls that URL."""
    opa = config.opa
    ns = config.system_namespace
    component = "policy-gate"
    selector = {"app.kubernetes.io/name": opa.name}
    data_json = json.dumps({"fleetplane": {"config": render_opa_data(config)}}, indent=2)
    policy_data = {policy_configmap_key(path): text for path, text in policies.items()}
    size = sum(len(t.encode()) for t in policy_data.values())
    if size > CONFIGMAP_LIMIT_BYTES:
        raise ValueError(f"policies are {size} bytes, above the ConfigMap budget")
    digest = hashlib.sha256(
        json.dumps([sorted(policy_data.items()), data_json]).encode()
    ).hexdigest()

    container = {
        "name": "opa",
        "image": opa.image,
        "args": [
            "run",
            "--server",
            f"--addr=0.0.0.0:{opa.port}",
            f"--diagnostic-addr=0.0.0.0:{OPA_DIAGNOSTIC_PORT}",
            "--tls-cert-file=/certs/tls.crt",
            "--tls-private-key-file=/certs/tls.key",
            "--log-format=json",
            "--disable-telemetry",
            *OPA_RUN_FLAGS,
            # ConfigMap volumes keep each revision in a hidden directory: load only the live one
            "--ignore=.*",
            "/policies",
            "/data",
        ],
        "env": [{"name": name, "value": value} for name, value in OPA_GC_ENV.items()],
        "ports": [
            {"name": "https", "containerPort": opa.port, "protocol": "TCP"},
            {"name": "diagnostics", "containerPort": OPA_DIAGNOSTIC_PORT, "protocol": "TCP"},
        ],
        "readinessProbe": {
            "httpGet": {"path": "/health", "port": "diagnostics"},
            "periodSeconds": 5,
        },
        "livenessProbe": {
            "httpGet": {"path": "/health", "port": "diagnostics"},
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
        },
        "resources": {
            # the memory OPA's GC budget (OPA_GC_ENV) may use, reserved
            "requests": {"cpu": "100m", "memory": "1Gi"},
            "limits": {"memory": "1Gi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "policies", "mountPath": "/policies", "readOnly": True},
            {"name": "data", "mountPath": "/data", "readOnly": True},
            {"name": "certs", "mountPath": "/certs", "readOnly": True},
        ],
    }
    service_account: Manifest = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _meta(opa.name, ns, component=component),
        "automountServiceAccountToken": False,
    }
    manifests: list[Manifest] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(f"{opa.name}-policies", ns, component=component),
            "data": policy_data,
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(f"{opa.name}-data", ns, component=component),
            "data": {"config.json": data_json},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": _meta(f"{opa.name}-tls", ns, component=component),
            "type": "kubernetes.io/tls",
            "stringData": {"tls.crt": tls.cert_pem, "tls.key": tls.key_pem, "ca.crt": tls.ca_pem},
        },
        {
            # The CA is public: clients (the controller) mount it without reading Secrets.
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(f"{opa.name}-ca", ns, component=component),
            "data": {"ca.crt": tls.ca_pem},
        },
    ]
    in_cluster: list[Manifest] = [
        service_account,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _meta(opa.name, ns, component=component, extra_labels=selector),
            "spec": {
                "replicas": opa.replicas,
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {
                        "labels": {**common_labels(component), **selector},
                        "annotations": {"fleetplane.dev/config-sha256": digest},
                    },
                    "spec": {
                        "serviceAccountName": opa.name,
                        "automountServiceAccountToken": False,
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": 1000,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "topologySpreadConstraints": [
                            {
                                "maxSkew": 1,
                                "topologyKey": "kubernetes.io/hostname",
                                "whenUnsatisfiable": "ScheduleAnyway",
                                "labelSelector": {"matchLabels": selector},
                            }
                        ],
                        "containers": [container],
                        "volumes": [
                            {
                                "name": "policies",
                                "configMap": {
                                    "name": f"{opa.name}-policies",
                                    "items": [
                                        {"key": policy_configmap_key(p), "path": p}
                                        for p in sorted(policies)
                                    ],
                                },
                            },
                            {
                                "name": "data",
                                "configMap": {
                                    "name": f"{opa.name}-data",
                                    "items": [{"key": "config.json", "path": "data.json"}],
                                },
                            },
                            {"name": "certs", "secret": {"secretName": f"{opa.name}-tls"}},
                        ],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(opa.name, ns, component=component),
            "spec": {
                "selector": selector,
                "ports": [
                    {
                        "name": "https",
                        "port": OPA_SERVICE_PORT,
                        "targetPort": "https",
                        "protocol": "TCP",
                    }
                ],
            },
        },
    ]
    if opa.replicas > 1:
        in_cluster.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": _meta(opa.name, ns, component=component),
                "spec": {"minAvailable": 1, "selector": {"matchLabels": selector}},
            }
        )
    if opa.deploy:
        manifests = [in_cluster[0], *manifests, *in_cluster[1:]]
    manifests.append(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": _meta(opa.name, component=component),
            "webhooks": [
                {
                    "name": "admission.fleetplane.dev",
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "timeoutSeconds": opa.webhook_timeout_seconds,
                    # Fail closed, but only for team namespaces (namespaceSelector): the
                    # platform's own namespaces never depend on OPA being up.
                    "failurePolicy": opa.failure_policy,
                    "matchPolicy": "Equivalent",
                    "namespaceSelector": webhook_namespace_selector(),
                    "rules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["pods"],
                            "scope": "Namespaced",
                        },
                        {
                            "apiGroups": ["batch"],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["jobs", "cronjobs"],
                            "scope": "Namespaced",
                        },
                        {
                            "apiGroups": ["apps"],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["deployments", "statefulsets"],
                            "scope": "Namespaced",
                        },
                        {
                            "apiGroups": ["batch.volcano.sh"],
                            "apiVersions": ["v1alpha1"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["jobs"],
                            "scope": "Namespaced",
                        },
                    ],
                    "clientConfig": webhook_client_config(config, _b64(tls.ca_pem)),
                }
            ],
        }
    )
    return manifests


# ---------------------------------------------------------------------------------------------
# Controller
# ---------------------------------------------------------------------------------------------


def controller_cluster_rules() -> list[dict[str, Any]]:
    """Everything the controller does cluster-wide, and nothing more (no Secrets, no `*`)."""
    read = ["get", "list", "watch"]
    return [
        # observe nodes; cordon and label them during driver upgrades
        {"apiGroups": [""], "resources": ["nodes"], "verbs": [*read, "patch"]},
        # observe pods; annotate (idle warnings, deadlines); delete reclaimed pods, driver pods
        # and finished validator pods. Creating pods is granted only in the validator's namespace
        # (controller_namespace_rules): cluster-wide it would let the controller start a pod
        # under any ServiceAccount in any namespace.
        {"apiGroups": [""], "resources": ["pods"], "verbs": [*read, "patch", "delete"]},
        # team namespaces: spend accumulator and budget-warning annotations, Events on them
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": [*read, "patch"]},
        # PodDisruptionBudgets decide which victims and drains can go ahead
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": read},
        # drain through the eviction API so PodDisruptionBudgets are honoured
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        # Events are only ever created, and only as core/v1 (controller/act/events.py)
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": read},
        {
            "apiGroups": ["scheduling.volcano.sh"],
            "resources": ["podgroups", "queues"],
            "verbs": read,
        },
        # stop Volcano jobs (Volcano has no suspend field: an AbortJob Command) and annotate
        # them; every write is a merge patch, never a PUT, so no `update`
        {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": [*read, "patch"]},
        {"apiGroups": ["bus.volcano.sh"], "resources": ["commands"], "verbs": ["create"]},
        # find a pod's owner; a reclaimed notebook's Deployment or StatefulSet, or a bare
        # ReplicaSet (no Deployment owns it), is scaled to zero by patching spec.replicas
        # together with the annotation recording why (controller/act/idle.py `_scale_to_zero`)
        {
            "apiGroups": ["apps"],
            "resources": ["deployments", "statefulsets", "replicasets"],
            "verbs": [*read, "patch"],
        },
        # suspend Jobs (a merge patch of spec.suspend)
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": [*read, "patch"]},
    ]


def controller_namespace_rules(config: FleetConfig) -> list[dict[str, Any]]:
    """What the controller does in its own namespace: its lease, the driver-upgrade validator
    pods, and finding OPA's replicas to push spend to each of them.

    The validator runs in `upgrade.validator_namespace`, which the rendered document leaves to
    its default, the controller's namespace (`controller.namespace`; controller/upgrade/
    settings.py): `FleetConfig.upgrade` has no such field. So this Role, in the controller's
    namespace, is where creating pods is granted, and nowhere else."""
    rules: list[dict[str, Any]] = [
        # `create` cannot be limited by name; reading and renewing are limited to our lease
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            # one Lease for reconcile passes, one for driver-upgrade passes; renewed and
            # released with merge patches only (controller/lease.py), so no `update`
            "resourceNames": [
                config.controller.lease_name,
                f"{config.controller.lease_name}-upgrade",
            ],
            "verbs": ["get", "patch"],
        },
        # the driver-upgrade validator pod (controller/upgrade/act.py `CreateValidator`); it is
        # read, listed and deleted through the ClusterRole
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]},
    ]
    if config.opa.deploy:
        rules.append(
            {
                "apiGroups": ["discovery.k8s.io"],
                "resources": ["endpointslices"],
                "verbs": ["get", "list"],
            }
        )
    return rules


def controller_manifests(config: FleetConfig) -> list[Manifest]:
    """ServiceAccount, least-privilege RBAC, the rendered configuration and the CronJobs
    (reconcile passes, and driver-upgrade passes)."""
    ns = config.system_namespace
    component = "controller"
    selector = {"app.kubernetes.io/name": CONTROLLER_NAME}
    rendered = render_opa_data(config)
    subject = [{"kind": "ServiceAccount", "name": CONTROLLER_NAME, "namespace": ns}]
    volumes: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": f"{CONTROLLER_NAME}-config"}}
    ]
    mounts: list[dict[str, Any]] = [{"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": True}]
    if config.opa.deploy:
        volumes.append(
            {"name": "opa-ca", "configMap": {"name": f"{config.opa.name}-ca", "optional": True}}
        )
        mounts.append({"name": "opa-ca", "mountPath": OPA_CA_MOUNT, "readOnly": True})
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": _meta(CONTROLLER_NAME, ns, component=component),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _meta(CONTROLLER_NAME, component=component),
            "rules": controller_cluster_rules(),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta(CONTROLLER_NAME, component=component),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": CONTROLLER_NAME,
            },
            "subjects": subject,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(CONTROLLER_NAME, ns, component=component),
            "rules": controller_namespace_rules(config),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(CONTROLLER_NAME, ns, component=component),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": CONTROLLER_NAME,
            },
            "subjects": subject,
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(f"{CONTROLLER_NAME}-config", ns, component=component),
            "data": {CONFIG_FILE: json.dumps(rendered, indent=2)},
        },
        _controller_cronjob(
            config,
            name=CONTROLLER_NAME,
            command=["reconcile"],
            schedule=rendered["controller"]["schedule"],
            selector=selector,
            volumes=volumes,
            mounts=mounts,
        ),
        # Driver upgrades run as their own passes under their own Lease, at the same period.
        _controller_cronjob(
            config,
            name=f"{CONTROLLER_NAME}-upgrade",
            command=["upgrade", "run"],
            schedule=rendered["controller"]["schedule"],
            selector=selector,
            volumes=volumes,
            mounts=mounts,
        ),
    ]


def _controller_cronjob(
    config: FleetConfig,
    *,
    name: str,
    command: list[str],
    schedule: str,
    selector: dict[str, str],
    volumes: list[dict[str, Any]],
    mounts: list[dict[str, Any]],
) -> Manifest:
    """A controller CronJob: one pass per run, never two at once."""
    ns = config.system_namespace
    settings = config.controller
    component = "controller"
    period = settings.period_seconds
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": _meta(name, ns, component=component, extra_labels=selector),
        "spec": {
            "schedule": schedule,
            "suspend": settings.suspend,
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": period,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {
                "spec": {
                    "backoffLimit": 0,
                    "activeDeadlineSeconds": period,
                    "ttlSecondsAfterFinished": 3600,
                    "template": {
                        "metadata": {"labels": {**common_labels(component), **selector}},
                        "spec": {
                            "serviceAccountName": CONTROLLER_NAME,
                            "restartPolicy": "Never",
                            "securityContext": {
                                "runAsNonRoot": True,
                                "runAsUser": 65532,
                                "seccompProfile": {"type": "RuntimeDefault"},
                            },
                            "containers": [
                                {
                                    "name": "controller",
                                    "image": settings.image,
                                    "command": ["python", "-m", "controller", *command],
                                    "env": [
                                        {
                                            "name": CONFIG_ENV,
                                            "value": f"{CONFIG_MOUNT}/{CONFIG_FILE}",
                                        },
                                        {
                                            "name": "POD_NAMESPACE",
                                            "valueFrom": {
                                                "fieldRef": {"fieldPath": "metadata.namespace"}
                                            },
                                        },
                                    ],
                                    "resources": {
                                        "requests": {"cpu": "100m", "memory": "256Mi"},
                                        "limits": {"memory": "1Gi"},
                                    },
                                    "securityContext": {
                                        "allowPrivilegeEscalation": False,
                                        "readOnlyRootFilesystem": True,
                                        "capabilities": {"drop": ["ALL"]},
                                    },
                                    "volumeMounts": mounts,
                                }
                            ],
                            "volumes": volumes,
                        },
                    },
                }
            },
        },
    }


# ---------------------------------------------------------------------------------------------
# Everything
# ---------------------------------------------------------------------------------------------


def render_manifests(
    config: FleetConfig,
    *,
    policies_dir: Path = POLICIES_DIR,
    tls: TlsMaterial | None = None,
) -> list[Manifest]:
    """Every Kubernetes object the components declare in a cluster, in apply order.

    Helm releases are not included (their objects come from the charts); Volcano's CRDs are,
    for a cluster without charts. When `tls` is not
    given and the admission gate is declared, throwaway TLS material is generated.
    """
    manifests = [system_namespace(config), *priority_classes(config)]
    for team in config.teams:
        manifests += team_manifests(config, team)
    if any(not cluster.helm_charts for cluster in config.clusters):
        manifests += volcano_crds()
    manifests += volcano_queues(config)
    if config.opa.gate:
        if tls is None:
            tls = TlsMaterial(
                **generate_tls_bundle(dns_names=opa_tls_dns_names(config), validity_days=1)
            )
        manifests += policy_gate_manifests(config, read_policies(policies_dir), tls)
    if config.controller.deploy:
        manifests += controller_manifests(config)
    return manifests
