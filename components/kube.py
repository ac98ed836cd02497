"""Plain Kubernetes manifests (the metadata every object of the platform carries) and how a
component declares one as the matching typed pulumi_kubernetes resource."""

from __future__ import annotations

import re
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from fleet import labels

_TYPED_KINDS = {
    ("v1", "Namespace"): lambda: k8s.core.v1.Namespace,
    ("v1", "ServiceAccount"): lambda: k8s.core.v1.ServiceAccount,
    ("v1", "ConfigMap"): lambda: k8s.core.v1.ConfigMap,
    ("v1", "Secret"): lambda: k8s.core.v1.Secret,
    ("v1", "Service"): lambda: k8s.core.v1.Service,
    ("v1", "ResourceQuota"): lambda: k8s.core.v1.ResourceQuota,
    ("v1", "LimitRange"): lambda: k8s.core.v1.LimitRange,
    ("apps/v1", "Deployment"): lambda: k8s.apps.v1.Deployment,
    ("batch/v1", "CronJob"): lambda: k8s.batch.v1.CronJob,
    ("policy/v1", "PodDisruptionBudget"): lambda: k8s.policy.v1.PodDisruptionBudget,
    ("scheduling.k8s.io/v1", "PriorityClass"): lambda: k8s.scheduling.v1.PriorityClass,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): lambda: k8s.rbac.v1.ClusterRole,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): lambda: k8s.rbac.v1.ClusterRoleBinding,
    ("rbac.authorization.k8s.io/v1", "Role"): lambda: k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): lambda: k8s.rbac.v1.RoleBinding,
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
    ): lambda: k8s.admissionregistration.v1.ValidatingWebhookConfiguration,
    (
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
    ): lambda: k8s.apiextensions.v1.CustomResourceDefinition,
}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def resource_name(prefix: str, manifest: dict[str, Any]) -> str:
    """A stack-unique Pulumi name: prefix, namespace (if any) and object name."""
    meta = manifest["metadata"]
    parts = [prefix, meta.get("namespace"), meta["name"]]
    return "-".join(p for p in parts if p)


def declare(
    prefix: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions
) -> pulumi.CustomResource:
    """The typed resource for a built-in kind, or a CustomResource for anything else."""
    api_version, kind = manifest["apiVersion"], manifest["kind"]
    name = resource_name(prefix, manifest)
    fields = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind")}
    factory = _TYPED_KINDS.get((api_version, kind))
    if factory is None:
        return k8s.apiextensions.CustomResource(
            name, api_version=api_version, kind=kind, opts=opts, **fields
        )
    cls = factory()
    kwargs = {_snake(k): v for k, v in fields.items()}
    resource: pulumi.CustomResource = cls(name, opts=opts, **kwargs)
    return resource


def declare_all(
    prefix: str,
    manifests: list[dict[str, Any]],
    opts: pulumi.ResourceOptions,
    *,
    namespaces: dict[str, pulumi.Resource] | None = None,
) -> list[pulumi.CustomResource]:
    """Declare manifests in order; an object in a namespace declared here (or passed in
    `namespaces`) waits for that namespace."""
    known = dict(namespaces or {})
    declared = []
    for manifest in manifests:
        namespace = manifest["metadata"].get("namespace")
        options = opts
        if namespace in known:
            options = pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(depends_on=[known[namespace]])
            )
        resource = declare(prefix, manifest, options)
        if manifest["kind"] == "Namespace":
            known[manifest["metadata"]["name"]] = resource
        declared.append(resource)
    return declared


Manifest = dict[str, Any]


CONFIG_HASH_ANNOTATION = "fleetplane.dev/config-sha256"
"""On a Deployment's pod template: the digest of what its pods read only at start, so a change
rolls them (the gate's OPA, the controller's admission keeper)."""


def restricted_container_security_context() -> dict[str, Any]:
    """The security context of every container the platform runs itself: no privilege
    escalation, a read-only root filesystem, every capability dropped (the Pod Security
    Standards' restricted level, with the pod's non-root user and seccomp profile)."""
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def common_labels(component: str) -> dict[str, str]:
    return {
        labels.MANAGED_BY: labels.MANAGED_BY_VALUE,
        "app.kubernetes.io/part-of": "fleetplane",
        "app.kubernetes.io/component": component,
    }


def memory_quantity(mib: int) -> str:
    """A memory quantity of `mib` MiB as Kubernetes writes it: whole GiB as `NGi` (what the
    manifests said before the size was configurable, so an unchanged fleet's objects stay
    byte-equal and Pulumi sees no change), else `NMi`."""
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def meta(
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


def service(
    name: str,
    namespace: str,
    *,
    component: str,
    selector: dict[str, str],
    ports: dict[str, int],
    protocol: str | None = None,
    extra_labels: dict[str, str] | None = None,
) -> Manifest:
    """A ClusterIP Service in front of the pods `selector` picks, the one shape every Service
    of the platform has. `ports` maps a port's name to its number; each port targets the
    pods' container port of the same name, so a component renumbers its container without
    touching its Service. `protocol` is written on every port when given: the gate's and the
    admission front's Services have always written `TCP` (Kubernetes' default), and dropping it
    would show as a change of every existing stack's Service in `pulumi preview`."""
    port_list: list[dict[str, Any]] = []
    for port_name, number in ports.items():
        port: dict[str, Any] = {"name": port_name, "port": number, "targetPort": port_name}
        if protocol is not None:
            port["protocol"] = protocol
        port_list.append(port)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(name, namespace, component=component, extra_labels=extra_labels),
        "spec": {"selector": selector, "ports": port_list},
    }


def resource_slug(resource: str) -> str:
    """`nvidia.com/gpu` -> `nvidia-com-gpu`, for object names."""
    return re.sub(r"[^a-z0-9]+", "-", resource.lower()).strip("-")


# ---------------------------------------------------------------------------------------------
# Cluster-wide
# ---------------------------------------------------------------------------------------------
