"""Bursting under policy on the local fleet (issue 34 item 3), with the real Karpenter-kwok,
API server, kwok, Volcano and OPA (the project's policies): a cluster with a one-node H100 pool
reserved for team research and an open on-demand H100 pool, which is therefore a burst tier (its
NodePool carries the taint `fleetplane.dev/burst-tier=on-demand`).

Research's reservation is full; its Volcano gang of two 8-GPU members waits, and Karpenter buys
nothing for it. The burst concern's pass asks the policy, opens the on-demand tier on research's
Queue and adds the toleration to the gang's pods; Karpenter brings on-demand nodes and the gang
runs there. Team serving, past its budget's warning line, is refused: its gang stays pending and
untolerated, and no node is bought for it. When research's gang is gone, the next pass closes the
tier."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from controller.decide.burst import BURST_TIER
from controller.observe.kube import KubeClient
from fleet.config import FleetConfig, parse_fleet
from localfleet.controlplane import LocalCluster
from localfleet.karpenter import LocalKarpenter
from tests.components.component_testkit import minimal_raw_fleet
from tests.conftest import OpaServer
from tests.controller.conftest import Harness, config_for
from tests.localfleet.karpenter_kit import (
    H100,
    karpenter_fleet,
    karpenter_nodes,
    running_karpenter,
    running_on,
)
from tests.localfleet.test_volcano import container, wait_for

pytestmark = pytest.mark.integration

RESERVED = "kb-h100-reserved"
OPEN = "kb-h100"
QUEUES = {"research": "kb-research", "serving": "kb-serving"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def burst_fleet() -> FleetConfig:
    """One H100 node reserved for research, up to three open on-demand H100 nodes (room for
    both gangs, so that only the taint keeps serving's off); nodes go 5 s after their last pod."""
    raw = minimal_raw_fleet()
    karpenter_fleet(raw)
    raw["clusters"][0]["pools"] = [
        {"name": RESERVED, "model": "h100-80gb", "machine_type": "p5.48xlarge", "max_nodes": 1}
        | {"teams": ["research"]},
        {"name": OPEN, "model": "h100-80gb", "machine_type": "p5.48xlarge", "max_nodes": 3},
    ]
    return parse_fleet(raw)


@pytest.fixture(scope="module")
def karpenter_with_reservation(kube: LocalCluster) -> Iterator[LocalKarpenter]:
    with running_karpenter(kube, burst_fleet()) as runner:
        yield runner


@pytest.fixture
def client(kube: LocalCluster) -> Iterator[KubeClient]:
    found = KubeClient.from_kubeconfig(str(kube.kubeconfig))
    try:
        yield found
    finally:
        found.close()


def document(research_ns: str, serving_ns: str) -> dict[str, Any]:
    """The local stack's document with the test's pools, namespaces and queues."""
    found = config_for(research_ns)
    base = found["pools"]["h100-ondemand"]
    found["pools"] = {
        RESERVED: {**base, "teams": ["research"]},
        OPEN: {**base, "teams": []},
        **{k: v for k, v in found["pools"].items() if k != "h100-ondemand"},
    }
    found["reserved_pools"] = {RESERVED: ["research"]}
    found["namespaces"][serving_ns] = "serving"
    found["teams"]["serving"]["namespaces"] = [serving_ns]
    for team, queue in QUEUES.items():
        found["teams"][team]["queue"] = queue
    return found


def queue(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "reclaimable": False},
    }


def volcano_gang(namespace: str, job: str, members: int, pools: list[str], queue_name: str) -> Any:
    """A Volcano Job of `members` 8-GPU training pods that may run on any of `pools`."""
    spec = {
        "containers": [container(8)],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "fleetplane.dev/pool", "operator": "In", "values": pools}
                            ]
                        }
                    ]
                }
            }
        },
        "nodeSelector": {"nvidia.com/gpu.product": H100},
        "tolerations": [GPU_TOLERATION],
        "terminationGracePeriodSeconds": 0,
        "restartPolicy": "Never",
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": job, "namespace": namespace},
        "spec": {
            "minAvailable": members,
            "queue": queue_name,
            "schedulerName": "volcano",
            "tasks": [
                {
                    "name": "worker",
                    "replicas": members,
                    "template": {
                        "metadata": {
                            "labels": {"job": job, "fleetplane.dev/workload-type": "training"}
                        },
                        "spec": spec,
                    },
                }
            ],
        },
    }


def filler(namespace: str) -> dict[str, Any]:
    """One 8-GPU pod pinned to research's reservation: it fills it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "filler", "namespace": namespace, "labels": {"job": "filler"}},
        "spec": {
            "containers": [container(8)],
            "nodeSelector": {"fleetplane.dev/pool": RESERVED, "nvidia.com/gpu.product": H100},
            "tolerations": [GPU_TOLERATION],
            "terminationGracePeriodSeconds": 0,
        },
    }


def pods_of(kube: LocalCluster, namespace: str, job: str) -> list[dict[str, Any]]:
    return list(kube.get_json("pods", "-n", namespace, "-l", f"job={job}")["items"])


def unschedulable(kube: LocalCluster, namespace: str, job: str, count: int) -> bool:
    found = pods_of(kube, namespace, job)
    return len(found) == count and all(
        any(
            c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
            for c in p.get("status", {}).get("conditions", [])
        )
        for p in found
    )


def burst_tolerated(pod: dict[str, Any]) -> bool:
    return any(t.get("key") == BURST_TIER for t in pod["spec"].get("tolerations") or [])


def events(kube: LocalCluster, namespace: str, reason: str) -> list[dict[str, Any]]:
    found = kube.get_json("events", "-n", namespace)["items"]
    return [e for e in found if e.get("reason") == reason]


def logged(run: Any, event: str) -> list[dict[str, Any]]:
    return [line for line in run.logs if line["event"] == event]


def test_a_waiting_gang_bursts_to_on_demand_within_budget_and_a_team_without_headroom_waits(
    kube: LocalCluster,
    karpenter_with_reservation: LocalKarpenter,
    volcano: Any,
    namespace: str,
    client: KubeClient,
    opa_server: OpaServer,
) -> None:
    serving_ns = f"t-{uuid.uuid4().hex[:10]}"
    kube.kubectl("create", "namespace", serving_ns)
    kube.apply([queue(name) for name in QUEUES.values()])
    doc = document(namespace, serving_ns)
    month = dt.datetime.now(dt.UTC).strftime("%Y-%m")
    serving_budget = doc["teams"]["serving"]["monthly_budget_usd"]
    opa_server.put_data("fleetplane/config", doc)
    opa_server.put_data(
        "fleetplane/spend",
        {
            "research": {"month": month, "usd": 0},
            "serving": {"month": month, "usd": serving_budget * 0.95},
        },
    )
    opa_server.put_data("fleetplane/reservations", {})
    h = Harness(kube=kube, namespace=namespace, opa=opa_server, document=doc, client=client)
    research_job, serving_job = f"rb-{uuid.uuid4().hex[:6]}", f"sb-{uuid.uuid4().hex[:6]}"
    try:
        # The open pool's NodePool is a burst tier; the reservation is not.
        pools = {p["metadata"]["name"]: p for p in kube.get_json("nodepools")["items"]}
        assert {"key": BURST_TIER, "value": "on-demand", "effect": "NoSchedule"} in pools[OPEN][
            "spec"
        ]["template"]["spec"]["taints"]
        assert not [
            t
            for t in pools[RESERVED]["spec"]["template"]["spec"]["taints"]
            if t["key"] == BURST_TIER
        ]

        kube.apply([filler(namespace)])
        (reserved_node,) = wait_for(
            "the reservation filled", lambda: running_on(kube, namespace, "filler", 1), 180
        )

        kube.apply(
            [
                volcano_gang(namespace, research_job, 2, [RESERVED, OPEN], QUEUES["research"]),
                volcano_gang(serving_ns, serving_job, 1, [OPEN], QUEUES["serving"]),
            ]
        )
        wait_for(
            "research's gang unschedulable",
            lambda: unschedulable(kube, namespace, research_job, 2),
            120,
        )
        wait_for(
            "serving's gang unschedulable",
            lambda: unschedulable(kube, serving_ns, serving_job, 1),
            120,
        )
        # Neither may use the burst tier yet: Karpenter buys nothing (the reservation is at its
        # limit, the open pool's taint is not tolerated).
        time.sleep(15)
        assert not karpenter_nodes(kube, OPEN)
        assert [n["metadata"]["name"] for n in karpenter_nodes(kube, RESERVED)] == [reserved_node]

        # As if the gangs had waited two minutes (the wait is 60 s here). A dry run says what it
        # would do and writes nothing.
        now = time.time() + 120
        dry = h.run(now, concerns=("burst",), dry_run=True)
        assert f"DRY-RUN burst: would open queue {QUEUES['research']}" in dry.out
        assert dry.out.count("DRY-RUN burst: would admit") == 2
        assert not any(burst_tolerated(p) for p in pods_of(kube, namespace, research_job))
        assert BURST_TIER not in (
            client.get(f"/apis/scheduling.volcano.sh/v1beta1/queues/{QUEUES['research']}")[
                "metadata"
            ].get("annotations")
            or {}
        )

        run = h.run(now, concerns=("burst",))
        (opened,) = logged(run, "burst.open")
        assert opened["target"] == f"queue {QUEUES['research']}" and opened["tier"] == "on-demand"
        (refused,) = logged(run, "burst.refused")
        assert refused["team"] == "serving"
        assert any("no budget headroom" in r for r in refused["reasons"]), refused
        assert len(logged(run, "burst.admit")) == 2

        research_queue = client.get(
            f"/apis/scheduling.volcano.sh/v1beta1/queues/{QUEUES['research']}"
        )
        annotations = research_queue["metadata"]["annotations"]
        assert annotations[BURST_TIER] == "on-demand"
        assert "may burst from reserved to on-demand" in annotations["fleetplane.dev/burst-reason"]
        serving_queue = client.get(
            f"/apis/scheduling.volcano.sh/v1beta1/queues/{QUEUES['serving']}"
        )
        assert BURST_TIER not in (serving_queue["metadata"].get("annotations") or {})

        # Karpenter brings on-demand nodes of the burst tier, and the gang runs there.
        nodes = wait_for(
            "research's gang running on the burst tier",
            lambda: running_on(kube, namespace, research_job, 2),
            240,
        )
        burst_nodes = {n["metadata"]["name"]: n for n in karpenter_nodes(kube, OPEN)}
        assert set(nodes) <= set(burst_nodes) and reserved_node not in nodes
        for name in nodes:
            node = burst_nodes[name]
            assert node["metadata"]["labels"][BURST_TIER] == "on-demand"
            assert node["metadata"]["labels"]["karpenter.sh/capacity-type"] == "on-demand"
        assert events(kube, namespace, "BurstOpened") and events(kube, namespace, "BurstAdmitted")

        # Serving was refused: still pending, without the toleration, nothing bought for it.
        time.sleep(10)
        (serving_pod,) = pods_of(kube, serving_ns, serving_job)
        assert serving_pod["status"]["phase"] == "Pending"
        assert not burst_tolerated(serving_pod)
        assert len(karpenter_nodes(kube, OPEN)) == 2
        assert events(kube, serving_ns, "BurstRefused")

        # The next pass counts research's accelerators on the burst tier (the bill's input) and
        # keeps the tier open; serving is refused again.
        run = h.run(now + 30, concerns=("burst",))
        assert (
            run.summary.get("team_burst_gpus", team="research", tier="on-demand", model="h100-80gb")
            == 16
        )
        assert not logged(run, "burst.close") and not logged(run, "burst.open")

        # Research's gang goes: the tier closes.
        kube.kubectl("delete", "jobs.batch.volcano.sh", research_job, "-n", namespace)
        wait_for("research's gang gone", lambda: not pods_of(kube, namespace, research_job), 120)
        run = h.run(now + 60, concerns=("burst",))
        (closed,) = logged(run, "burst.close")
        assert closed["target"] == f"queue {QUEUES['research']}"
        research_queue = client.get(
            f"/apis/scheduling.volcano.sh/v1beta1/queues/{QUEUES['research']}"
        )
        assert BURST_TIER not in (research_queue["metadata"].get("annotations") or {})
    finally:
        kube.kubectl(
            "delete", "jobs.batch.volcano.sh", "--all", "-n", namespace, "--wait=false", check=False
        )
        kube.kubectl(
            "delete",
            "jobs.batch.volcano.sh",
            "--all",
            "-n",
            serving_ns,
            "--wait=false",
            check=False,
        )
        kube.kubectl("delete", "pod", "filler", "-n", namespace, "--wait=false", check=False)
        kube.kubectl("delete", "namespace", serving_ns, "--wait=false", check=False)
    wait_for("Karpenter's empty nodes removed", lambda: not karpenter_nodes(kube), 180)
    for name in QUEUES.values():
        kube.kubectl("delete", "queue", name, "--wait=false", check=False)
