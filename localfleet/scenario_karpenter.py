"""The scenario's Karpenter scene (issue 34 item 1): a pool that has no node grows for a gang and
shrinks after it, through the real Karpenter with its KWOK provider (`localfleet.karpenter`).

A team submits a Volcano gang that only the local cluster's first Karpenter pool can hold (its
GPU model and pool by node selector): one member per node the pool may have, each asking for a
whole node's accelerators. Volcano leaves the gang pending whole (no node fits), Karpenter sees
the unschedulable pods and brings the pool's nodes, kwok makes them Ready, Volcano binds the
gang. Then the gang finishes: kwok has no stage that completes a pod, so the scene deletes the
Volcano Job, as its end would; the nodes are empty, and Karpenter consolidates them after the
cluster's `karpenter.consolidate_after`.

Both waits are bounded. A scene that does not reach its end is a failure of `fleetplane up`
(a `ClusterError`, exit status 2) naming what it waited for, with the gang's pods, the pool's
nodes and NodeClaims, and the end of Karpenter's log: the scene is the only place `make up`
shows Karpenter working, and a scene that silently went on would hide a broken autoscaler.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fleet import labels
from fleet.config import FleetConfig, PoolConfig
from fleet.karpenter import karpenter_pools, units_per_node
from localfleet.controlplane import ClusterError, LocalCluster
from localfleet.karpenter import karpenter_cluster, work_dir
from localfleet.processes import Supervisor

GANG = "a10g-eval"
"""The gang's Volcano Job (the name says the scene's pool; the pool itself is the config's)."""
NODEPOOL_LABEL = "karpenter.sh/nodepool"
"""The label Karpenter puts on the nodes (and NodeClaims) it makes for a NodePool."""
GROW_SECONDS = 300.0
"""Pending gang to running on new nodes: Volcano's gang decision, Karpenter's batch window
(1-10 s), kwok's Ready stage, registration, Volcano's next session. Measured 10 s in `make up`'s
e2e run on the shared 2-core machine; the bound leaves room for a loaded machine (the Karpenter
tests allow 240 s) without hiding a stuck autoscaler."""
SHRINK_SECONDS = 300.0
"""Job deleted to the pool's nodes gone: the pods' deletion, `consolidate_after` (5 s locally),
Karpenter's disruption poll and its draining and deletion of the empty nodes. Measured 66 s in
the same run."""
POLL_SECONDS = 2.0

GangBuilder = Callable[[str, int, dict[str, Any]], dict[str, Any]]
"""(name, members, member pod spec) -> the team's Volcano Job of that gang, in its namespace
and queue, labelled `app: <name>` (the scenario's `gang`)."""


def play_karpenter_scene(
    cluster: LocalCluster,
    fleet: FleetConfig,
    *,
    gang: GangBuilder,
    priority_class: str,
    log: Callable[[str], None],
) -> str:
    """Play the scene on the first Karpenter pool of the fleet's local cluster; the account's
    lines for it (nothing when the fleet has no local Karpenter pool)."""
    local = karpenter_cluster(fleet)
    if local is None:
        return ""
    pool = karpenter_pools(local)[0]
    members, per_member = pool.max_nodes, units_per_node(local, pool)
    job = gang(GANG, members, member_spec(pool, per_member, priority_class))
    namespace = job["metadata"]["namespace"]
    where = f"{namespace}/{GANG}"
    before = len(pool_nodes(cluster, pool.name))
    log(
        f"scenario: Karpenter: a gang of {members} x {per_member} {pool.accelerator.label_value} "
        f"for pool {pool.name} ({before} nodes)"
    )
    cluster.apply([job])
    submitted = time.monotonic()
    wait_until(
        cluster,
        pool.name,
        f"Karpenter's nodes of pool {pool.name} and the gang {where} running on them",
        lambda: gang_running(cluster, namespace, members, pool.name),
        GROW_SECONDS,
        namespace,
    )
    grown = len(pool_nodes(cluster, pool.name))
    grew_in = time.monotonic() - submitted
    log(f"scenario: Karpenter: pool {pool.name} at {grown} nodes; the gang finishes")
    # kwok completes no pod: the gang's end is its Job going away, as a finished run's would
    cluster.kubectl("delete", "jobs.batch.volcano.sh", GANG, "-n", namespace, "--wait=false")
    finished = time.monotonic()
    wait_until(
        cluster,
        pool.name,
        f"the empty nodes of pool {pool.name} consolidated away (consolidate_after "
        f"{local.karpenter.consolidate_after}) once the gang {where} finished",
        lambda: not pool_nodes(cluster, pool.name) and not gang_pods(cluster, namespace),
        SHRINK_SECONDS,
        namespace,
    )
    shrank_in = time.monotonic() - finished
    return "\n".join(
        [
            "",
            "",
            "Karpenter (autoscaled pools):",
            f"  pool {pool.name}: {before} -> {grown} nodes for gang {where} "
            f"({members} x {per_member} {pool.accelerator.label_value}, {pool.machine_type} "
            f"{pool.capacity_type}) in {grew_in:.0f}s",
            f"  pool {pool.name}: {grown} -> 0 nodes, consolidated {shrank_in:.0f}s after "
            "the gang finished",
        ]
    )


def member_spec(pool: PoolConfig, per_member: int, priority_class: str) -> dict[str, Any]:
    """The pod of one gang member: a whole node of `pool`, chosen by the labels the pool's
    NodePool puts on its nodes (GPU product and pool), tolerating its taints."""
    return {
        "priorityClassName": priority_class,
        "restartPolicy": "OnFailure",
        "terminationGracePeriodSeconds": 0,
        "nodeSelector": {
            pool.accelerator.node_label: pool.accelerator.label_value,
            labels.POOL: pool.name,
        },
        "tolerations": [{"key": labels.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [
            {
                "name": "main",
                "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                "resources": {"limits": {pool.resource: str(per_member)}},
            }
        ],
    }


def pool_nodes(cluster: LocalCluster, pool: str) -> list[dict[str, Any]]:
    """The nodes Karpenter made for `pool`, whatever their state."""
    return list(cluster.get_json("nodes", "-l", f"{NODEPOOL_LABEL}={pool}")["items"])


def gang_pods(cluster: LocalCluster, namespace: str) -> list[dict[str, Any]]:
    return list(cluster.get_json("pods", "-n", namespace, "-l", f"app={GANG}")["items"])


def gang_running(cluster: LocalCluster, namespace: str, members: int, pool: str) -> bool:
    """Every member Running, each on its own node of the pool."""
    pods = gang_pods(cluster, namespace)
    if len(pods) != members or any(p["status"].get("phase") != "Running" for p in pods):
        return False
    on = {p["spec"].get("nodeName") for p in pods}
    return len(on) == members and on <= {n["metadata"]["name"] for n in pool_nodes(cluster, pool)}


def wait_until(
    cluster: LocalCluster,
    pool: str,
    what: str,
    reached: Callable[[], bool],
    timeout: float,
    namespace: str,
) -> None:
    """Poll `reached` for `timeout` seconds; past it, fail with what was awaited and what
    there was."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if reached():
            return
        time.sleep(POLL_SECONDS)
    raise ClusterError(
        f"scenario: waited {timeout:.0f}s for {what}, in vain.\n"
        + what_there_was(cluster, pool, namespace)
    )


def what_there_was(cluster: LocalCluster, pool: str, namespace: str) -> str:
    """The gang's pods, the pool's nodes and NodeClaims, and the end of Karpenter's log."""
    lines = ["the gang's pods:"]
    for p in gang_pods(cluster, namespace):
        status = p.get("status", {})
        why = next(
            (
                str(c.get("message") or c.get("reason"))
                for c in status.get("conditions", []) or []
                if c.get("type") == "PodScheduled" and c.get("status") == "False"
            ),
            "",
        )
        lines.append(
            f"  {p['metadata']['name']}: {status.get('phase')} on "
            f"{p['spec'].get('nodeName') or '-'} {why[:200]}"
        )
    lines.append(f"nodes of pool {pool}:")
    for node in pool_nodes(cluster, pool):
        deleting = " (deleting)" if node["metadata"].get("deletionTimestamp") else ""
        lines.append(f"  {node['metadata']['name']}{deleting}")
    claims = cluster.kubectl(
        "get", "nodeclaims", "-l", f"{NODEPOOL_LABEL}={pool}", "-o", "wide", check=False
    )
    lines += ["NodeClaims:", claims.stdout.strip() or claims.stderr.strip() or "  (none)"]
    lines.append(Supervisor("karpenter", work_dir(cluster), detached=True).log_tail(30))
    return "\n".join(lines)
