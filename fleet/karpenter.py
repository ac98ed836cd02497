"""The fleet's Karpenter-scaled pools as Karpenter objects: one NodePool per pool, its node class
(KWOKNodeClass on the local fleet, EC2NodeClass on EKS), and the KWOK provider's instance types
made from the catalog and the configured prices. Pure: manifests in, nothing applied.

What a NodePool says, and why:
- requirements pin the pool's machine type and capacity type, so Karpenter buys exactly what the
  managed node group would have; pods choose a pool through the labels the product's rules read
  (`fleetplane.dev/pool`, `nvidia.com/gpu.product`, ...), which are the template's labels;
- taints and labels are the pool's (`fleet.nodes`); on the local fleet, which has no GPU Feature
  Discovery, the labels GFD would add are declared too, as the static fake nodes carry them;
- limits hold the pool to `max_nodes` worth of accelerators;
- weight orders the tiers: reserved or committed capacity first, then on-demand, then spot, so
  that a pod several pools could take lands on the cheapest commitment first (bursting builds
  on this order);
- disruption: consolidation of empty or underused nodes after `consolidate_after`; empty nodes
  (no work to lose) may go at any time, while nodes holding work (Underutilized, Drifted) are
  disrupted only inside the fleet's maintenance windows, at most `max_unavailable` at a time.
"""

from __future__ import annotations

from typing import Any

from fleet import labels
from fleet.config import ClusterConfig, FleetConfig, MaintenanceWindow, PoolConfig
from fleet.nodes import declared_labels, node_taints, observed_labels

API_VERSION = "karpenter.sh/v1"
KWOK_NODE_CLASS_API = "karpenter.kwok.sh/v1alpha1"
EC2_NODE_CLASS_API = "karpenter.k8s.aws/v1"
KWOK_NODE_CLASS = "fleetplane"
"""The one KWOKNodeClass of a local cluster (it has no settings)."""

TIER_WEIGHTS = {"reserved": 30, "on-demand": 20, "spot": 10}
"""NodePool weight per capacity tier: Karpenter tries the heaviest NodePool a pod fits first.
`reserved` (EC2 capacity reservations, committed use) is Karpenter's third capacity type; the
fleet's pools are on-demand or spot today."""

DISRUPTING_WORK = ("Underutilized", "Drifted")
"""Karpenter's disruption reasons that evict running pods (Empty nodes hold none)."""

BURST_TIER = "fleetplane.dev/burst-tier"
"""Taint key (effect NoSchedule) and node label, value the tier (`on-demand`, `spot`), of a burst
pool's nodes: a pool open to every team in a cluster that reserves pools for teams. A team's
home is its reservation; only work the controller's burst concern let onto the tier tolerates
the taint, and Karpenter does not use a NodePool whose taint a pending pod does not tolerate
(`controller.decide.burst` writes the same key)."""

# Label domains Karpenter owns or refuses in a NodePool's template, and labels of other
# autoscalers that would be false on a Karpenter node.
_NOT_TEMPLATE_DOMAINS = ("kubernetes.io", "k8s.io", "karpenter.sh", "eks.amazonaws.com")

NODE_CPU = "96"
NODE_MEMORY = "1536Gi"
"""CPU and memory of a local instance type: the catalog knows accelerators, not host sizes, so
the KWOK instance types have the shape of the static fake nodes (`localfleet.fakenodes`)."""

_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_WEEK = 7 * 24 * 60


def karpenter_pools(cluster: ClusterConfig) -> list[PoolConfig]:
    """The cluster's pools Karpenter scales."""
    return [p for p in cluster.pools if cluster.autoscaler_for(p) == "karpenter"]


def node_class_ref(cluster: ClusterConfig, pool: PoolConfig) -> dict[str, str]:
    if cluster.provider == "aws":
        return {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": pool.name}
    return {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": KWOK_NODE_CLASS}


def template_labels(fleet: FleetConfig, cluster: ClusterConfig, pool: PoolConfig) -> dict[str, str]:
    """Labels every node of the pool gets from Karpenter: the pool's declared labels, and on
    the local fleet the ones GPU Feature Discovery would add."""
    found = (
        observed_labels(fleet, pool)
        if cluster.provider == "local"
        else declared_labels(fleet, pool)
    )
    return {
        key: value
        for key, value in found.items()
        if not any(
            key.split("/")[0] == d or key.split("/")[0].endswith("." + d)
            for d in _NOT_TEMPLATE_DOMAINS
        )
    }


def units_per_node(cluster: ClusterConfig, pool: PoolConfig) -> int:
    """Accelerators a node brings as Karpenter counts them: the instance type's physical GPUs on
    EKS (sharing and MIG come later, from the device plugin); the schedulable units the local
    fake nodes expose."""
    return pool.allocatable_per_node if cluster.provider == "local" else pool.accelerators


def burst_tier(cluster: ClusterConfig, pool: PoolConfig) -> str | None:
    """The tier a pool is burst capacity of (its capacity type), or None: a pool is burst
    capacity when it is open to every team and its cluster reserves some pool for teams."""
    if pool.teams or not any(other.teams for other in cluster.pools):
        return None
    return pool.capacity_type


def node_pool(fleet: FleetConfig, cluster: ClusterConfig, pool: PoolConfig) -> dict[str, Any]:
    """The pool's NodePool."""
    karpenter = cluster.karpenter
    node_labels = template_labels(fleet, cluster, pool)
    taints = node_taints(pool)
    tier = burst_tier(cluster, pool)
    if tier is not None:
        node_labels[BURST_TIER] = tier
        taints.append({"key": BURST_TIER, "value": tier, "effect": "NoSchedule"})
    requirements = [
        {"key": labels.INSTANCE_TYPE, "operator": "In", "values": [pool.machine_type]},
        {"key": labels.KARPENTER_CAPACITY_TYPE, "operator": "In", "values": [pool.capacity_type]},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
    ]
    return {
        "apiVersion": API_VERSION,
        "kind": "NodePool",
        "metadata": {
            "name": pool.name,
            "labels": {labels.MANAGED_BY: labels.MANAGED_BY_VALUE, labels.POOL: pool.name},
        },
        "spec": {
            "weight": TIER_WEIGHTS[pool.capacity_type],
            "limits": {pool.resource: str(pool.max_nodes * units_per_node(cluster, pool))},
            "template": {
                "metadata": {"labels": node_labels},
                "spec": {
                    "nodeClassRef": node_class_ref(cluster, pool),
                    "requirements": requirements,
                    "taints": taints,
                    "expireAfter": karpenter.expire_after,
                },
            },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": karpenter.consolidate_after,
                "budgets": disruption_budgets(fleet.upgrade.maintenance_windows, pool),
            },
        },
    }


def disruption_budgets(windows: list[MaintenanceWindow], pool: PoolConfig) -> list[dict[str, Any]]:
    """At most `max_unavailable` nodes at a time; outside the maintenance windows, no node that
    holds work (one budget of 0 nodes per closed stretch of the week, as a cron schedule and a
    duration). Empty nodes may go at any time."""
    budgets: list[dict[str, Any]] = [{"nodes": str(pool.max_unavailable)}]
    for start, minutes in closed_stretches(windows):
        day, rest = divmod(start, 24 * 60)
        hour, minute = divmod(rest, 60)
        budgets.append(
            {
                "nodes": "0",
                "reasons": list(DISRUPTING_WORK),
                # cron's day of week: 0 is Sunday
                "schedule": f"{minute} {hour} * * {(day + 1) % 7}",
                "duration": _duration(minutes),
            }
        )
    if not windows:
        budgets.append({"nodes": "0", "reasons": list(DISRUPTING_WORK)})
    return budgets


def closed_stretches(windows: list[MaintenanceWindow]) -> list[tuple[int, int]]:
    """The stretches of the week outside every window: (start minute from Monday 00:00 UTC,
    length in minutes). A window's end is inclusive to the minute (23:59 closes the day). A
    stretch across Sunday midnight is one stretch starting on Sunday."""
    open_minutes = bytearray(_WEEK)
    for window in windows:
        start, end = _minutes(window.start), _minutes(window.end) + 1
        for day in window.days:
            base = _DAYS.index(day) * 24 * 60
            open_minutes[base + start : base + end] = b"\x01" * (end - start)
    if all(open_minutes) or not windows:
        return []
    # Start the walk on an open minute so that a closed stretch never straddles the walk's end.
    first_open = open_minutes.index(1)
    stretches: list[tuple[int, int]] = []
    length = 0
    for step in range(1, _WEEK + 1):
        minute = (first_open + step) % _WEEK
        if not open_minutes[minute]:
            length += 1
            continue
        if length:
            stretches.append(((minute - length) % _WEEK, length))
            length = 0
    return sorted(stretches)


def _minutes(clock: str) -> int:
    hours, minutes = clock.split(":")
    return int(hours) * 60 + int(minutes)


def _duration(minutes: int) -> str:
    hours, rest = divmod(minutes, 60)
    return f"{hours}h{rest}m" if hours else f"{rest}m"


# --- node classes ------------------------------------------------------------------------------


def kwok_node_class() -> dict[str, Any]:
    return {
        "apiVersion": KWOK_NODE_CLASS_API,
        "kind": "KWOKNodeClass",
        "metadata": {"name": KWOK_NODE_CLASS},
    }


def ec2_node_class(cluster: ClusterConfig, pool: PoolConfig) -> dict[str, Any]:
    """The pool's EC2NodeClass: the family's accelerated AMI, the cluster's node role and
    subnets, the pool's boot disk."""
    karpenter = cluster.karpenter
    groups = karpenter.security_group_tags or {"karpenter.sh/discovery": cluster.remote_name}
    # Bottlerocket keeps containers' data on its second volume.
    device = "/dev/xvdb" if karpenter.ami_family == "Bottlerocket" else "/dev/xvda"
    return {
        "apiVersion": EC2_NODE_CLASS_API,
        "kind": "EC2NodeClass",
        "metadata": {"name": pool.name, "labels": {labels.MANAGED_BY: labels.MANAGED_BY_VALUE}},
        "spec": {
            "amiSelectorTerms": [
                {"alias": f"{karpenter.ami_family.lower()}@{karpenter.ami_version}"}
            ],
            # Karpenter's EC2NodeClass takes the role's name (it makes the instance profile).
            "role": cluster.node_role_arn.rsplit("/", 1)[-1],
            "subnetSelectorTerms": [{"id": subnet} for subnet in cluster.subnet_ids],
            "securityGroupSelectorTerms": [{"tags": dict(groups)}],
            "blockDeviceMappings": [
                {
                    "deviceName": device,
                    "ebs": {
                        "volumeSize": f"{pool.disk_size_gb}Gi",
                        "volumeType": "gp3",
                        "encrypted": True,
                    },
                }
            ],
            "tags": {labels.POOL: pool.name, "fleetplane.dev/cluster": cluster.name},
        },
    }


def karpenter_manifests(fleet: FleetConfig, cluster: ClusterConfig) -> list[dict[str, Any]]:
    """Every Karpenter object of the cluster: node classes first, then the NodePools."""
    pools = karpenter_pools(cluster)
    if not pools:
        return []
    if cluster.provider == "aws":
        classes = [ec2_node_class(cluster, pool) for pool in pools]
    else:
        classes = [kwok_node_class()]
    return [*classes, *(node_pool(fleet, cluster, pool) for pool in pools)]


# --- the KWOK provider's instance types --------------------------------------------------------


def kwok_instance_types(fleet: FleetConfig, cluster: ClusterConfig) -> list[dict[str, Any]]:
    """The instance types file of Karpenter's KWOK provider for the cluster's Karpenter pools:
    one per machine type, with the pool's accelerators, the fake nodes' CPU and memory, and an
    offering per capacity type priced from the model's per-accelerator prices."""
    out: dict[str, dict[str, Any]] = {}
    for pool in karpenter_pools(cluster):
        units = units_per_node(cluster, pool)
        prices = fleet.models[pool.model].price_per_hour_usd
        instance = {
            "name": pool.machine_type,
            "architecture": "amd64",
            "operatingSystems": ["linux"],
            "resources": {
                "cpu": NODE_CPU,
                "memory": NODE_MEMORY,
                "pods": "110",
                pool.resource: str(units),
            },
            "offerings": [
                {
                    "Price": round(price * pool.accelerators, 4),
                    "Available": True,
                    "Requirements": [
                        {
                            "key": labels.KARPENTER_CAPACITY_TYPE,
                            "operator": "In",
                            "values": [capacity],
                        },
                        {
                            "key": "topology.kubernetes.io/zone",
                            "operator": "In",
                            "values": [f"{cluster.name}-a"],
                        },
                    ],
                }
                for capacity, price in (("on-demand", prices.on_demand), ("spot", prices.spot))
            ],
        }
        known = out.setdefault(pool.machine_type, instance)
        if known["resources"] != instance["resources"]:
            raise ValueError(
                f"pools sharing machine type {pool.machine_type!r} expose different "
                f"accelerator counts ({known['resources']} vs {instance['resources']}): Karpenter "
                "has one instance type per name"
            )
    return list(out.values())
