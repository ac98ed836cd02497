"""The workload operators of the fleet: the controllers that turn a team's object of their own
kind (a TrainJob, a RayCluster, a JobSet...) into Jobs, pods and PodGroups. For each, the kinds
the admission gate is sent (so the object the user wrote is judged whole) and the identities it
trusts to copy what it judged into the objects the operator makes. Defaults for Kubeflow
Trainer, KubeRay, JobSet and LeaderWorkerSet, as their upstream install manifests name them; a
platform team adds its own operator (or moves one) here, without code: its kinds are sent to the
gate and judged by the shape of their pod templates (policies/fleetplane/lib/workloads)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from fleet.config.base import ConfigModel, NamespaceName

ServiceAccountRef = Annotated[
    str, Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$")
]
"""`NAMESPACE/NAME` of a ServiceAccount."""


class OperatorKind(ConfigModel):
    """One API group's resources an operator reconciles, as a webhook rule names them."""

    group: str = Field(min_length=1)
    """API group, e.g. jobset.x-k8s.io (required)."""
    versions: list[str] = Field(min_length=1)
    """Versions served (required; the webhook's matchPolicy Equivalent sends the others too)."""
    resources: list[str] = Field(min_length=1)
    """Plural resource names (required), with the subresources that change what they hold
    (e.g. `leaderworkersets/scale`)."""


class OperatorConfig(ConfigModel):
    """An operator the gate trusts to copy what it judged."""

    enabled: bool = True
    """False: neither sent nor trusted (the operator is not installed). Default true."""
    service_accounts: list[ServiceAccountRef] = Field(min_length=1)
    """`NAMESPACE/NAME` of the ServiceAccounts its controllers run as (required). Their namespaces are the
    platform's (the gate judges nothing there)."""
    kinds: list[OperatorKind] = Field(min_length=1)
    """The kinds it reads (required): every one is sent to the gate, since trusting the operator's copies
    is sound only when what it copies from was judged."""

    @property
    def namespaces(self) -> list[NamespaceName]:
        return list(dict.fromkeys(ref.split("/", 1)[0] for ref in self.service_accounts))


BUILTIN_OPERATORS: dict[str, dict[str, Any]] = {
    # kubeflow/trainer manifests/base: the controller manager in kubeflow-system.
    "kubeflow-trainer": {
        "service_accounts": ["kubeflow-system/kubeflow-trainer-controller-manager"],
        "kinds": [
            {
                "group": "trainer.kubeflow.org",
                "versions": ["v1alpha1"],
                "resources": ["trainjobs", "trainingruntimes"],
            }
        ],
    },
    # ray-project/kuberay helm chart kuberay-operator: ServiceAccount kuberay-operator.
    "kuberay": {
        "service_accounts": ["ray-system/kuberay-operator"],
        "kinds": [{"group": "ray.io", "versions": ["v1"], "resources": ["rayclusters", "rayjobs"]}],
    },
    # kubernetes-sigs/jobset config/default: namePrefix jobset-, namespace jobset-system.
    "jobset": {
        "service_accounts": ["jobset-system/jobset-controller-manager"],
        "kinds": [{"group": "jobset.x-k8s.io", "versions": ["v1alpha2"], "resources": ["jobsets"]}],
    },
    # kubernetes-sigs/lws config/default: namePrefix lws-, namespace lws-system.
    "leaderworkerset": {
        "service_accounts": ["lws-system/lws-controller-manager"],
        "kinds": [
            {
                "group": "leaderworkerset.x-k8s.io",
                "versions": ["v1"],
                "resources": ["leaderworkersets", "leaderworkersets/scale"],
            }
        ],
    },
}
"""The operators of issue 30, as their upstream install manifests name their identities."""


def merge_builtin_operators(given: Any) -> Any:
    """The built-in operators, each replaced by the configuration's entry of the same name,
    beside the configuration's own."""
    if not isinstance(given, dict):
        return given
    return {**BUILTIN_OPERATORS, **given}


class OperatorsMixin(ConfigModel):
    """The `operators` section of the fleet configuration."""

    operators: dict[NamespaceName, OperatorConfig] = Field(default_factory=dict)
    """Workload operators by name; the built-in ones (`BUILTIN_OPERATORS`: kubeflow-trainer,
    kuberay, jobset, leaderworkerset) are always present, replaced by an entry of the same name
    (`enabled: false` turns one off). Default the built-in ones."""

    @model_validator(mode="before")
    @classmethod
    def _merge_builtin_operators(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        return {**data, "operators": merge_builtin_operators(data.get("operators") or {})}

    def enabled_operators(self) -> list[OperatorConfig]:
        return [op for op in self.operators.values() if op.enabled]
