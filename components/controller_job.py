"""The runtime controller, run by CronJobs (its passes) and a Deployment (the admission
keeper) with least-privilege RBAC."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi

from components.kube import (
    CONFIG_HASH_ANNOTATION,
    Manifest,
    common_labels,
    declare_all,
    meta,
    restricted_container_security_context,
)
from fleet.config import FleetConfig
from fleet.digest import config_digest
from fleet.disruption_kept import part_names as kept_answer_parts
from fleet.render import (
    CONFIG_ENV,
    CONFIG_FILE,
    CONFIG_MOUNT,
    CONTROLLER_NAME,
    OPA_CA_MOUNT,
    OPA_TOKEN_MOUNT,
    cron_schedule,
    opa_controller_token_secret,
    opa_data_configmap,
    render_opa_data,
)


@dataclass(frozen=True, kw_only=True)
class ControllerJobArgs:
    """fleet: the validated fleet; provider: the cluster's kubernetes provider; namespace:
    the system Namespace resource, when declared by the caller (objects wait for it)."""

    fleet: FleetConfig
    provider: pulumi.ProviderResource | None = None
    namespace: pulumi.Resource | None = None


class ControllerJob(pulumi.ComponentResource):
    """`fleetplane controller reconcile` every `controller.period_seconds`, never two at once
    (`concurrencyPolicy: Forbid`), reading the rendered configuration from a ConfigMap."""

    resources: list[pulumi.CustomResource]

    def __init__(
        self, name: str, args: ControllerJobArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("fleetplane:controller:ControllerJob", name, None, opts)
        fleet = args.fleet
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        namespaces = {fleet.system_namespace: args.namespace} if args.namespace else {}
        self.resources = declare_all(
            name, controller_manifests(fleet), child, namespaces=namespaces
        )
        self.register_outputs(
            {
                "schedule": cron_schedule(fleet.controller.period_seconds),
                "image": fleet.controller.image,
            }
        )


UNBUILT_IMAGE = "fleetplane.invalid/controller@sha256:" + "0" * 64
"""The image of a CronJob declared suspended without `controller.image` (the local stack without
a real node, where the controller runs on the host): the API server requires an image, and
this one can never be pulled (`.invalid` is a reserved domain), so nothing runs by mistake."""


def shard_configmaps(name: str) -> list[str]:
    """The ConfigMaps of the sharded documents beside the kept one (fleet/opa_shards.py)."""
    from fleet.opa_shards import SHARDED, SHARDS, shard_configmap

    return [shard_configmap(name, doc, i) for doc in SHARDED for i in range(SHARDS)]


def controller_cluster_rules() -> list[dict[str, Any]]:
    """Everything the controller does cluster-wide, and nothing more (no Secrets, no `*`)."""
    read = ["get", "list", "watch"]
    return [
        # observe nodes; cordon, taint, label and annotate them (driver upgrades, health
        # remediation: state, timers, the remediation request)
        {"apiGroups": [""], "resources": ["nodes"], "verbs": [*read, "patch"]},
        # the GpuHealthy node condition written on quarantine and on return to service
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
        # observe pods; annotate (idle warnings, deadlines); delete reclaimed pods, driver pods
        # and finished validator pods. Creating pods is granted only in the validator's namespace
        # (controller_namespace_rules): cluster-wide it would let the controller start a pod
        # under any ServiceAccount in any namespace.
        {"apiGroups": [""], "resources": ["pods"], "verbs": [*read, "patch", "delete"]},
        # team namespaces: spend accumulator and budget-warning annotations, Events on them
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": [*read, "patch"]},
        # PodDisruptionBudgets decide which victims and drains can go ahead
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": read},
        # DRA claims and templates: the gate's claim records and the GPUs a pod holds by claim
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaims", "resourceclaimtemplates"],
            "verbs": read,
        },
        # is Karpenter already removing a node (a NodeClaim being deleted or gone)? then no
        # product actor takes it (controller/nodeflow/lock.py)
        {"apiGroups": ["karpenter.sh"], "resources": ["nodeclaims"], "verbs": ["get"]},
        # drain through the eviction API so PodDisruptionBudgets are honoured
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        # Events as core/v1; a repeat raises the count of the one there (controller/act/events.py)
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "get", "patch"]},
        {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": read},
        {
            "apiGroups": ["scheduling.volcano.sh"],
            "resources": ["podgroups", "queues"],
            "verbs": read,
        },
        # bursting: the team's open tier is an annotation of its Queue (controller/act/burst.py)
        {"apiGroups": ["scheduling.volcano.sh"], "resources": ["queues"], "verbs": ["patch"]},
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
        # the operators' workloads, stopped through their own APIs (controller/act/owners.py):
        # climb a pod's owners (GET), then one merge patch of the top with the record of why:
        # spec.suspend of a TrainJob, JobSet, RayJob or RayCluster, spec.replicas of a
        # LeaderWorkerSet (the object, not its scale subresource, so the record goes with it)
        *operator_workload_rules(),
    ]


OPERATOR_WORKLOADS: dict[str, list[str]] = {
    "trainer.kubeflow.org": ["trainjobs"],
    "jobset.x-k8s.io": ["jobsets"],
    "ray.io": ["rayjobs", "rayclusters"],
    "leaderworkerset.x-k8s.io": ["leaderworkersets"],
}
"""The operators' kinds the controller stops (controller/decide/operator_kinds.py)."""


OPERATOR_LINKS: dict[str, list[str]] = {"jobset.x-k8s.io": ["jobsets"], "ray.io": ["rayclusters"]}
"""The operators' objects a pass lists to climb a pod's owners to its top (a JobSet to its
TrainJob, a RayCluster to its RayJob: controller/observe/operator_objects.py)."""


def operator_workload_rules() -> list[dict[str, Any]]:
    return [
        {"apiGroups": [group], "resources": resources, "verbs": ["get", "patch"]}
        for group, resources in OPERATOR_WORKLOADS.items()
    ] + [
        {"apiGroups": [group], "resources": resources, "verbs": ["list"]}
        for group, resources in OPERATOR_LINKS.items()
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
                f"{config.controller.lease_name}-health",
                f"{config.controller.lease_name}-admission",
            ],
            "verbs": ["get", "patch"],
        },
        # the driver-upgrade validator pod (controller/upgrade/act.py `CreateValidator`); it is
        # read, listed and deleted through the ClusterRole
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]},
    ]
    kept = opa_data_configmap(config)
    if kept is not None:
        # the documents OPA loads at start (controller/act/opa_files.py): created once (`create`
        # cannot be limited by name), then only this ConfigMap read and merge-patched
        rules += [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": [
                    kept.partition("/")[2],
                    *shard_configmaps(kept.partition("/")[2]),
                    # the disruption answers a pass keeps for the next (act/disruption_memo.py)
                    *kept_answer_parts(kept.partition("/")[2]),
                ],
                "verbs": ["get", "patch"],
            },
            # the parts are read in one list of the controller's ConfigMaps (fleet/opa_shards.py)
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]},
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
    if config.opa.gate:
        # The controller's bearer token for OPA (the gate generates it): not optional, a pass
        # without it could neither ask for decisions nor publish spend.
        volumes.append(
            {
                "name": "opa-token",
                # the default mode (0644): the controller's user (65532) is not the owner
                "secret": {"secretName": opa_controller_token_secret(config)},
            }
        )
        mounts.append({"name": "opa-token", "mountPath": OPA_TOKEN_MOUNT, "readOnly": True})
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": meta(CONTROLLER_NAME, ns, component=component),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": meta(CONTROLLER_NAME, component=component),
            "rules": controller_cluster_rules(),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": meta(CONTROLLER_NAME, component=component),
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
            "metadata": meta(CONTROLLER_NAME, ns, component=component),
            "rules": controller_namespace_rules(config),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta(CONTROLLER_NAME, ns, component=component),
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
            "metadata": meta(f"{CONTROLLER_NAME}-config", ns, component=component),
            "data": {CONFIG_FILE: json.dumps(rendered, indent=2)},
        },
        # Resident, the reconcile passes run in the keeper's Deployment (below): no CronJob.
        *(
            []
            if config.controller.resident
            else [
                _controller_cronjob(
                    config,
                    name=CONTROLLER_NAME,
                    command=["reconcile"],
                    schedule=rendered["controller"]["schedule"],
                    selector=selector,
                    volumes=volumes,
                    mounts=mounts,
                )
            ]
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
        # GPU health remediation: its own passes, Lease and timers (controller/remediation).
        _controller_cronjob(
            config,
            name=f"{CONTROLLER_NAME}-health",
            command=["remediation", "run"],
            schedule=rendered["controller"]["schedule"],
            selector=selector,
            volumes=volumes,
            mounts=mounts,
        ),
        # The gate's admission data between passes, under its own Lease.
        _admission_keeper(
            config,
            volumes=volumes,
            mounts=mounts,
            config_hash=config_digest(rendered),
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
        "metadata": meta(name, ns, component=component, extra_labels=selector),
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
                        "spec": _controller_pod_spec(
                            config, command=command, volumes=volumes, mounts=mounts
                        )
                        | {"restartPolicy": "Never"},
                    },
                }
            },
        },
    }


KEEPER_NAME = f"{CONTROLLER_NAME}-admission"
"""The Deployment that keeps the gate's admission data current between passes."""


def _admission_keeper(
    config: FleetConfig,
    *,
    volumes: list[dict[str, Any]],
    mounts: list[dict[str, Any]],
    config_hash: str,
) -> Manifest:
    """`fleetplane controller admission --watch` (controller/admission_keeper.py): a workload
    admitted now is reserved against its team within a snapshot of its pods, not at the next
    period. One replica (a second would only take turns under the keeper's Lease); none while
    the CronJobs are suspended, as nothing of the controller runs in the cluster then. It reads
    its configuration once, at start: the hash of the rendered document on its pod template
    rolls it when the configuration changes (a CronJob's pass reads it at each run). Resident
    (`controller.resident`), it runs `reconcile --watch`: the whole reconcile pass once a period
    on the pods and nodes it keeps by watch, the keeper's passes between, and no reconcile
    CronJob is declared (docs/scale.md)."""
    ns = config.system_namespace
    component = "controller"
    selector = {"app.kubernetes.io/name": KEEPER_NAME}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(KEEPER_NAME, ns, component=component, extra_labels=selector),
        "spec": {
            "replicas": 0 if config.controller.suspend else 1,
            # never two keepers at once during a rollout: the old one stops, then the new starts
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {
                    "labels": {**common_labels(component), **selector},
                    "annotations": {CONFIG_HASH_ANNOTATION: config_hash},
                },
                "spec": _controller_pod_spec(
                    config,
                    # resident: the whole reconcile pass once a period, the keeper's between
                    command=["reconcile" if config.controller.resident else "admission", "--watch"],
                    volumes=volumes,
                    mounts=mounts,
                ),
            },
        },
    }


def _controller_pod_spec(
    config: FleetConfig,
    *,
    command: list[str],
    volumes: list[dict[str, Any]],
    mounts: list[dict[str, Any]],
) -> dict[str, Any]:
    """The controller's pod: its ServiceAccount, non-root and read-only, the rendered
    configuration mounted."""
    return {
        "serviceAccountName": CONTROLLER_NAME,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": "controller",
                "image": config.controller.image or UNBUILT_IMAGE,
                "command": ["fleetplane", "controller", *command],
                "env": [
                    {"name": CONFIG_ENV, "value": f"{CONFIG_MOUNT}/{CONFIG_FILE}"},
                    {
                        "name": "POD_NAMESPACE",
                        "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                    },
                ],
                "resources": {
                    "requests": {"cpu": "100m", "memory": "256Mi"},
                    "limits": {"memory": "1Gi"},
                },
                "securityContext": restricted_container_security_context(),
                "volumeMounts": mounts,
            }
        ],
        "volumes": volumes,
    }


# ---------------------------------------------------------------------------------------------
# Everything
# ---------------------------------------------------------------------------------------------
