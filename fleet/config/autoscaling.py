"""Who scales a cluster's GPU pools: the cloud's managed groups (EKS managed node groups, GKE
node pools with their autoscaling) or Karpenter (one NodePool per pool), and Karpenter's
settings (the checks of that choice are `checks.check_autoscaling`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fleet.config.base import ConfigModel

Autoscaler = Literal["managed", "karpenter"]

DURATION = r"^([0-9]+h)?([0-9]+m)?([0-9]+s)?$"
"""A Go duration as Karpenter's CRDs accept it: hours, minutes, seconds (30s, 10m, 720h)."""


class KarpenterConfig(ConfigModel):
    """Karpenter's NodePools for the cluster's pools (`autoscaler: karpenter`)."""

    consolidate_after: str = Field(default="10m", pattern=DURATION)
    """How long a node stays empty or underused before Karpenter may consolidate it.
    Default 10m."""
    expire_after: str = Field(default="Never", pattern=DURATION[:-1] + "|^Never$")
    """Node lifetime after which Karpenter replaces it, or Never. Expiry drains without regard
    for the disruption budgets, so GPU pools default to Never: replacing nodes is the
    controller's driver rollout, inside the maintenance windows. Default Never."""
    ami_family: Literal["AL2023", "Bottlerocket"] = "AL2023"
    """EKS: the EC2NodeClass's AMI family; Karpenter picks its accelerated (NVIDIA) variant for
    GPU instance types, so the image ships the driver. Default AL2023."""
    ami_version: str = "latest"
    """EKS: the AMI release of the family's alias (`al2023@v20250101`), or latest. Pin it in
    production: a new `latest` drifts every node. Default latest."""
    security_group_tags: dict[str, str] = Field(default_factory=dict)
    """EKS: tags that select the nodes' security groups; empty for
    `karpenter.sh/discovery: <cluster name>`, the tag Karpenter's guides put on the cluster's
    node security group. Default empty."""
