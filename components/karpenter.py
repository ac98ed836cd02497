"""The cluster's Karpenter-scaled GPU pools as Karpenter objects (`fleet.karpenter` renders
them): on EKS one EC2NodeClass (the accelerated AMI of the configured family, the node role,
subnets and security groups) and one NodePool per pool; on the local fleet one KWOKNodeClass
and the NodePools, which the Karpenter-kwok process beside the control plane acts on
(`localfleet.karpenter`).

Karpenter itself (its controller, IAM, the interruption queue) is installed with its own chart
on EKS, as the cluster is; this component declares what the fleet configuration says about the
pools. The managed node groups of the same pools are not declared (`components.nodepools`)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.kube import declare
from fleet.config import ClusterConfig, FleetConfig
from fleet.karpenter import karpenter_manifests


@dataclass(frozen=True, kw_only=True)
class KarpenterPoolsArgs:
    """fleet: the validated fleet; cluster: whose Karpenter pools; provider: the cluster's
    Kubernetes provider (None: the default provider)."""

    fleet: FleetConfig
    cluster: ClusterConfig
    provider: pulumi.ProviderResource | None = None


class KarpenterPools(pulumi.ComponentResource):
    """NodePools and their node classes; node classes first, since a NodePool naming a class
    that does not exist yet stays not Ready."""

    resources: list[pulumi.CustomResource]

    def __init__(
        self, name: str, args: KarpenterPoolsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("fleetplane:karpenter:KarpenterPools", name, None, opts)
        manifests = karpenter_manifests(args.fleet, args.cluster)
        classes = [m for m in manifests if m["kind"] != "NodePool"]
        pools = [m for m in manifests if m["kind"] == "NodePool"]
        child = pulumi.ResourceOptions(parent=self, provider=args.provider)
        declared_classes = [declare(name, m, child) for m in classes]
        after = pulumi.ResourceOptions(
            parent=self, provider=args.provider, depends_on=declared_classes
        )
        self.resources = [*declared_classes, *(declare(name, m, after) for m in pools)]
        self.register_outputs(
            {
                "node_pools": [m["metadata"]["name"] for m in pools],
                "node_classes": [f"{m['kind']}/{m['metadata']['name']}" for m in classes],
            }
        )
