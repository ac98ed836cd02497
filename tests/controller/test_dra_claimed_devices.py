"""Claimed GPUs in the controller's view of a pod (issue 30 item 5, observe/dra_claims.py
`with_claimed_devices`): a pod that holds GPUs only through DRA claims gets them in its demand,
which idle evidence and spend read (decide/idle.py, decide/spend.py `pod_cost`), and in the
manifest the decision policies read, where the preemption policy counts them as GPUs it would
free."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from controller.observe.dra_claims import (
    CLAIMED_RESOURCE,
    ClaimObject,
    claim_from_api,
    with_claimed_devices,
)
from controller.observe.model import pod_from_api

ROOT = Path(__file__).resolve().parents[2]
OPA = ROOT / "tools" / "bin" / "opa"

SPEC = {
    "devices": {
        "requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}]
    }
}


def raw_pod(uid: str, limits: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"pod-{uid}",
            "namespace": "analytics",
            "uid": uid,
            "labels": {"fleetplane.dev/workload-type": "batch"},
            "creationTimestamp": "2026-11-18T09:00:00Z",
        },
        "spec": {
            "nodeName": "h100-ondemand-0",
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "two"}],
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/x",
                    "resources": {"limits": limits or {}, "claims": [{"name": "gpus"}]},
                }
            ],
        },
        "status": {"phase": "Running", "startTime": "2026-11-18T09:01:00Z"},
    }


def claim(name: str, status: dict[str, Any], owner: str | None = None) -> ClaimObject:
    metadata: dict[str, Any] = {"name": name, "namespace": "analytics"}
    if owner:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner, "controller": True}
        ]
    return claim_from_api("ResourceClaim", {"metadata": metadata, "spec": SPEC, "status": status})


def allocated(*pods: str) -> dict[str, Any]:
    results = [
        {"request": "gpus", "driver": "gpu.nvidia.com", "pool": "n", "device": f"gpu-{i}"}
        for i in range(2)
    ]
    return {
        "allocation": {"devices": {"results": results}},
        "reservedFor": [{"resource": "pods", "name": p, "uid": p} for p in pods],
    }


def test_claimed_gpus_join_the_pods_demand_and_manifest() -> None:
    running, pending, other = (
        pod_from_api(raw_pod("a")),
        pod_from_api(raw_pod("b")),
        pod_from_api(raw_pod("c")),
    )
    limited = pod_from_api(raw_pod("d", {"nvidia.com/gpu": "1"}), {"nvidia.com/gpu": 1})
    claims = [
        claim("a-gpus", allocated("a")),
        claim("b-gpus", {}, owner="b"),  # made from b's template, not yet allocated
        claim("shared", allocated("a", "d")),
    ]
    pods = with_claimed_devices([running, pending, other, limited], claims)
    by_uid = {p.uid: p for p in pods}
    assert set(by_uid) == {"a", "b", "d"}  # c claims nothing: dropped like any CPU pod
    assert by_uid["a"].demand == {"nvidia.com/gpu": 4}
    assert by_uid["b"].demand == {"nvidia.com/gpu": 2}
    assert by_uid["d"].demand == {"nvidia.com/gpu": 3}
    limits = by_uid["a"].manifest()["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {CLAIMED_RESOURCE: "4"}


@pytest.mark.integration
def test_preemption_counts_a_victims_claimed_gpus() -> None:
    victim = with_claimed_devices([pod_from_api(raw_pod("a"))], [claim("a", allocated("a"))])[0]
    request = {
        "preemptor": {
            "pod": {
                "metadata": {"name": "p", "namespace": "ml-research"},
                "spec": {"containers": [{"name": "m", "image": "nvcr.io/x"}]},
            },
            "workload_type": "training",
            "priority": 1000,
            "pending_seconds": 900,
        },
        "victim": {
            "pod": victim.manifest(),
            "workload_type": "batch",
            "priority": 100,
            "running_seconds": 7200,
            "seconds_since_checkpoint": 300,
            "team_usage": {"nvidia.com/gpu": 6},
        },
        "now": 1795003600,
    }
    result = subprocess.run(
        [
            str(OPA),
            "eval",
            "--format=json",
            "-d",
            "policies",
            "--stdin-input",
            "data.fleetplane.decisions.preempt.decision with data.fleetplane.config as "
            "data.fleetplane.testing.config",
        ],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    decision = json.loads(result.stdout)["result"][0]["expressions"][0]["value"]
    assert decision["allow"] is True, decision
    # the victim's two claimed GPUs are what it would free (analytics keeps its guarantee of 2)
    assert any('after losing {"nvidia.com/gpu":2}' in r for r in decision["reasons"]), decision
