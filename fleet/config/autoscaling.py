"""Who scales a cluster's GPU pools: the cloud's managed groups (EKS managed node groups, GKE
node pools with their autoscaling) or Karpenter (one NodePool per pool), and Karpenter's
settings; and the checks of that choice."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from fleet.config.base import ConfigModel

if TYPE_CHECKING:
    from fleet.config.clusters import ClusterConfig, PoolConfig

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


def check_autoscaling(cluster: ClusterConfig, at: str, add: Any) -> None:
    """The choice of autoscaler for one cluster: Karpenter runs on EKS (its AWS provider) and on
    the local fleet (its KWOK provider), not on GKE, where pools scale with GKE's own
    autoscaler. Karpenter's accelerated AMIs carry the NVIDIA driver, so its EKS pools are
    `driver_manager: cloud`."""
    for pool in cluster.pools:
        if pool.autoscaler is None and cluster.autoscaler == "managed":
            continue
        where = f"{at}.pools[{pool.name}].autoscaler" if pool.autoscaler else f"{at}.autoscaler"
        if autoscaler_of(cluster, pool) != "karpenter":
            continue
        if cluster.provider == "gcp":
            add(
                where,
                "karpenter runs on aws and local clusters; GKE pools scale with GKE's "
                "autoscaler (autoscaler: managed, min_nodes/max_nodes)",
            )
        elif pool.accelerator.is_tpu:
            add(where, "karpenter scales GPU pools only; TPU pools are GKE node pools")
        elif cluster.provider == "aws" and pool.driver_manager == "gpu-operator":
            add(
                f"{at}.pools[{pool.name}].driver_manager",
                "karpenter's EKS nodes boot the accelerated AMI, whose image ships the NVIDIA "
                "driver: use driver_manager cloud (or autoscaler: managed)",
            )


def autoscaler_of(cluster: ClusterConfig, pool: PoolConfig) -> Autoscaler:
    """The pool's own choice, else its cluster's."""
    return pool.autoscaler or cluster.autoscaler
