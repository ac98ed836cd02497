"""The team's Volcano queue filled in at admission: a MutatingAdmissionPolicy (served as
admissionregistration.k8s.io/v1 by the pinned Kubernetes, no feature gate) that gives every
Pod, and the pod template of every Deployment, StatefulSet, ReplicaSet, Job and CronJob, created
in a team namespace without a queue the annotation `scheduling.volcano.sh/queue-name` of its
team's queue, and `schedulerName: volcano` where it names the default scheduler.

Why here and not in the gate: Volcano's PodGroup controller takes a plain pod's queue only from
that pod annotation (the namespace's annotation reaches only the PodGroups Volcano creates
itself), so a manifest that names no queue would run in `default`, outside the team's quota, and
the gate refuses it. Mutating admission runs before every validating webhook, so the gate
(components.policy_gate) judges the object with its queue filled in, and still refuses a queue
that is not the team's: the policy never overwrites a queue the manifest names. Pods that name
a PodGroup (`scheduling.k8s.io/group-name`, the pods of a Volcano Job) are left alone, as the
gate's queue rule leaves them.

The namespace-to-queue map comes from the fleet configuration, as the gate's data does
(fleet.render: a team's queue is its name), so both always agree."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi

from components.kube import Manifest, declare_all, meta
from components.volcano import SCHEDULER_NAME
from fleet import labels
from fleet.config import FleetConfig

API_VERSION = "admissionregistration.k8s.io/v1"
POLICY_NAME = "fleetplane-queue-defaults"
DEFAULT_SCHEDULER = "default-scheduler"
VOLCANO_GROUP_NAME = "scheduling.k8s.io/group-name"
"""The PodGroup a pod belongs to (the pods Volcano groups itself): such a pod keeps its group's
queue."""

# Where each kind keeps its pod template, as a CEL path below `object` and the matching
# ApplyConfiguration type path (Object.spec.template...): a Pod is its own template.
_SHAPES: dict[str, tuple[tuple[str, list[str]], ...]] = {
    "pods": (("", ["pods"]),),
    "templates": (
        ("apps", ["deployments", "statefulsets", "replicasets"]),
        ("batch", ["jobs"]),
    ),
    "cronjobs": (("batch", ["cronjobs"]),),
}
_TEMPLATE_PATH = {
    "pods": [],
    "templates": ["spec", "template"],
    "cronjobs": ["spec", "jobTemplate", "spec", "template"],
}


def team_queues(fleet: FleetConfig) -> dict[str, str]:
    """Namespace -> the Volcano queue of the team it belongs to (a team's queue is its name:
    components.volcano declares it, fleet.render gives the gate the same)."""
    return {ns: team.name for team in fleet.teams for ns in team.effective_namespaces}


def _path(shape: str, root: str) -> str:
    return ".".join([root, *_TEMPLATE_PATH[shape]])


def _apply_configuration(shape: str, metadata: str, spec: str) -> str:
    """`Object{spec: Object.spec{template: Object.spec.template{metadata: ..., spec: ...}}}`,
    nested down to the template of `shape`."""
    steps = _TEMPLATE_PATH[shape]
    inner = f"metadata: {metadata}, spec: {spec}"
    for depth in range(len(steps), 0, -1):
        type_name = ".".join(["Object", *steps[:depth]])
        inner = f"{steps[depth - 1]}: {type_name}{{{inner}}}"
    return f"Object{{{inner}}}"


def _type(shape: str, *fields: str) -> str:
    return ".".join(["Object", *_TEMPLATE_PATH[shape], *fields])


def policy(shape: str, queues: dict[str, str]) -> Manifest:
    """One MutatingAdmissionPolicy for the kinds of `shape` (pods, template holders, CronJobs)."""
    template = _path(shape, "object")
    old_template = _path(shape, "oldObject")
    annotations = f"{template}.?metadata.?annotations.orValue({{}})"
    queue_key, group_key = labels.VOLCANO_QUEUE_NAME, VOLCANO_GROUP_NAME
    unnamed = f"!({json.dumps(queue_key)} in {annotations}) && !({json.dumps(group_key)} in {annotations})"
    if shape == "pods":
        # A pod's queue is written when it is created; Volcano rebuilds the PodGroup of a pod
        # on its updates, so a running pod's queue is not changed under it.
        when = "request.operation == 'CREATE'"
    else:
        # On UPDATE only when the template itself changes, or the update drops the queue the
        # template had (a re-apply of the plain manifest): a controller's write to the
        # object's own metadata must not roll the pods of a workload admitted before.
        old_annotations = f"{old_template}.?metadata.?annotations.orValue({{}})"
        when = (
            "request.operation == 'CREATE' || "
            f"{template}.spec != {old_template}.spec || "
            f"{json.dumps(queue_key)} in {old_annotations}"
        )
    scheduler = f"{template}.spec.?schedulerName.orValue({json.dumps(DEFAULT_SCHEDULER)})"
    metadata = (
        f"{_type(shape, 'metadata')}{{annotations: {{{json.dumps(queue_key)}: variables.queue}}}}"
    )
    spec_with = f"{_type(shape, 'spec')}{{schedulerName: {json.dumps(SCHEDULER_NAME)}}}"
    spec = f"({scheduler} == {json.dumps(DEFAULT_SCHEDULER)} ? {spec_with} : {_type(shape, 'spec')}{{}})"
    rules = [
        {
            "apiGroups": [group],
            "apiVersions": ["v1"],
            "resources": resources,
            "operations": ["CREATE"] if shape == "pods" else ["CREATE", "UPDATE"],
        }
        for group, resources in _SHAPES[shape]
    ]
    return {
        "apiVersion": API_VERSION,
        "kind": "MutatingAdmissionPolicy",
        "metadata": meta(f"{POLICY_NAME}-{shape}", component="queue-defaults"),
        "spec": {
            "matchConstraints": {
                "resourceRules": rules,
                # the same resources in other versions too (as the gate's webhook)
                "matchPolicy": "Equivalent",
            },
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "matchConditions": [
                {
                    "name": "team-namespace",
                    "expression": f"request.namespace in {json.dumps(queues, sort_keys=True)}",
                },
                {"name": "written", "expression": when},
                {"name": "names-no-queue", "expression": unnamed},
            ],
            "variables": [
                {
                    "name": "queue",
                    "expression": f"{json.dumps(queues, sort_keys=True)}[request.namespace]",
                },
            ],
            "mutations": [
                {
                    "patchType": "ApplyConfiguration",
                    "applyConfiguration": {
                        "expression": _apply_configuration(shape, metadata, spec)
                    },
                }
            ],
        },
    }


def binding(shape: str, queues: dict[str, str]) -> Manifest:
    """Binds the policy of `shape` to the team namespaces only (the platform's own are never
    touched)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": meta(f"{POLICY_NAME}-{shape}", component="queue-defaults"),
        "spec": {
            "policyName": f"{POLICY_NAME}-{shape}",
            "matchResources": {
                "namespaceSelector": {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "In",
                            "values": sorted(queues),
                        }
                    ]
                }
            },
        },
    }


def queue_defaults_manifests(fleet: FleetConfig) -> list[Manifest]:
    """The policies and their bindings; none for a fleet without teams."""
    queues = team_queues(fleet)
    if not queues:
        return []
    out: list[Manifest] = []
    for shape in _SHAPES:
        out += [policy(shape, queues), binding(shape, queues)]
    return out


@dataclass(frozen=True, kw_only=True)
class QueueDefaultsArgs:
    """fleet: the validated fleet; provider: the cluster's kubernetes provider."""

    fleet: FleetConfig
    provider: pulumi.ProviderResource | None = None


class QueueDefaults(pulumi.ComponentResource):
    """The MutatingAdmissionPolicies that fill in a team's queue (see the module comment)."""

    resources: list[pulumi.CustomResource]

    def __init__(
        self, name: str, args: QueueDefaultsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("fleetplane:tenancy:QueueDefaults", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        manifests = queue_defaults_manifests(args.fleet)
        self.resources = declare_all(name, manifests, child)
        self.register_outputs({"namespaces": sorted(team_queues(args.fleet))})
