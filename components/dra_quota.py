"""A team's quota over the GPUs it claims through Dynamic Resource Allocation.

The team's accelerator quota is its Volcano queue's capability (components.volcano), one limit
across all its namespaces. Volcano's proportion plugin, which the platform runs, counts what
pods request in their containers, not the devices of their ResourceClaims, so claimed GPUs
would be outside it. Kubernetes' own ResourceQuota counts them: the pinned Kubernetes has one
key per DeviceClass, `<class>.deviceclass.resource.k8s.io/devices`, the devices the claims of
a namespace request. A ResourceQuota is per namespace, though, so it is the team-wide limit only
for a team of one namespace: that team gets one, holding its quota of the class's device family
(nvidia.com/gpu for gpu.nvidia.com). A team of several namespaces gets none (each would hold the
whole quota again); its claimed GPUs are bounded per workload by the gate's maximum and budget.
"""

from __future__ import annotations

from components.kube import Manifest, meta
from fleet.config import TeamConfig

DRA_CLASSES = {"gpu.nvidia.com": "nvidia.com/gpu"}
"""The DeviceClasses counted, each with the resource family its quota is taken from (the gate's
policies/fleetplane/lib/dra.rego `dra_device_classes`)."""

QUOTA_NAME = "dra-devices"


def dra_quota_key(device_class: str) -> str:
    """The ResourceQuota key of the devices a namespace's claims request from a class."""
    return f"{device_class}.deviceclass.resource.k8s.io/devices"


def dra_quota(team: TeamConfig, namespace: str, team_label: dict[str, str]) -> list[Manifest]:
    """The ResourceQuota of the team's claimed devices in `namespace`: one for a team of one
    namespace with a quota of a counted family; none otherwise."""
    hard = {
        dra_quota_key(device_class): str(team.quota[family])
        for device_class, family in DRA_CLASSES.items()
        if family in team.quota
    }
    if len(team.effective_namespaces) != 1 or not hard:
        return []
    return [
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": meta(QUOTA_NAME, namespace, component="tenancy", extra_labels=team_label),
            "spec": {"hard": hard},
        }
    ]
