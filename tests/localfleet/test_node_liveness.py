"""Fake nodes stay alive as kubelet-run nodes do: kwok renews a Lease per node, so the node
lifecycle controller never finds one silent, marks it Unknown and taints it unreachable (which
made Volcano skip nodes now and then, and would evict their pods after 300 s)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from localfleet.controlplane import NODE_LEASE_SECONDS, LocalCluster

pytestmark = pytest.mark.integration

LIFECYCLE_TAINTS = {"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"}
SILENT_AFTER = 60.0
"""Longer than the controller manager's node grace period (50 s) plus a monitor period."""


def _fake_nodes(kube: LocalCluster) -> list[dict]:
    return [
        n
        for n in kube.get_json("nodes")["items"]
        if (n["metadata"].get("annotations") or {}).get("kwok.x-k8s.io/node") == "fake"
    ]


def _age(timestamp: str) -> float:
    return (
        datetime.now(UTC) - datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    ).total_seconds()


def test_every_fake_node_holds_a_lease_kwok_renews(kube: LocalCluster) -> None:
    names = {n["metadata"]["name"] for n in _fake_nodes(kube)}
    assert names, "the session's cluster has no fake nodes"
    leases = {
        lease["metadata"]["name"]: lease["spec"]
        for lease in kube.get_json("leases", "-n", "kube-node-lease")["items"]
    }
    assert names <= leases.keys(), f"fake nodes without a Lease: {sorted(names - leases.keys())}"
    for name in names:
        assert leases[name]["leaseDurationSeconds"] == NODE_LEASE_SECONDS
        assert _age(leases[name]["renewTime"]) < NODE_LEASE_SECONDS, (name, leases[name])


def test_fake_nodes_stay_ready_and_untainted_past_the_grace_period(kube: LocalCluster) -> None:
    nodes = _fake_nodes(kube)
    youngest = min(_age(n["metadata"]["creationTimestamp"]) for n in nodes)
    if youngest < SILENT_AFTER:  # the file run alone: let the grace period pass first
        time.sleep(SILENT_AFTER - youngest)
        nodes = _fake_nodes(kube)
    for node in nodes:
        taints = {t["key"] for t in node["spec"].get("taints") or []}
        assert not taints & LIFECYCLE_TAINTS, (node["metadata"]["name"], node["spec"]["taints"])
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", (node["metadata"]["name"], ready)
