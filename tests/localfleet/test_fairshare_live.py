"""Fair share taken back, against the real parts: the session's Volcano places the work (its
`reclaim` action off, as the fleet configures it), the session's OPA answers the fairshare
decision from the project's policies, the controller's passes take back.

Two teams share the local fleet's H100 pool (8 nodes x 8 GPUs): `fsa` (queue weight 1) fills
it with eight 8-GPU batch pods checkpointed at different times; `fsb` (weight 3) then submits a
Deployment of eight 8-GPU replicas, which Volcano cannot place. The deserved shares are 16 and
48 GPUs. Stated convergence: a dry-run pass evicts nothing and says what it would take; the
first real pass takes back six pods (the six with the least work lost: most recent
checkpoints), Volcano places six of fsb's replicas on the freed nodes, and the second pass
takes nothing (fsa at its share, fsb at its own): shares 16/64 and 48/64, the queues' weights.
Here, beside the other tests that start the session's Volcano, so that the controller's tests,
which run earlier and expect no Volcano controller, run without it."""

from __future__ import annotations

import copy
import io
import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controller.config import Settings, parse_config
from controller.log import configure
from controller.observe.kube import KubeClient
from controller.reconcile import run_pass
from fleet.config import load_stack_config
from fleet.project import stack_file
from fleet.render import render_opa_data
from localfleet.controlplane import LocalCluster, free_port
from localfleet.servers import OpaServer

pytestmark = pytest.mark.integration

H100 = "NVIDIA-H100-80GB-HBM3"
PRODUCT = "nvidia.com/gpu.product"
QUEUE = "scheduling.volcano.sh/queue-name"
TEAMS = {"fsa": 1, "fsb": 3}
POOL_GPUS = 64


def wait_for(what: str, check: Callable[[], Any], timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def pod_spec() -> dict[str, Any]:
    return {
        "schedulerName": "volcano",
        "nodeSelector": {PRODUCT: H100},
        "tolerations": [{"operator": "Exists"}],
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "main",
                "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                "resources": {"limits": {"nvidia.com/gpu": "8"}},
            }
        ],
    }


def meta(name: str, namespace: str, team: str, **annotations: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": namespace,
        "labels": {"fleetplane.dev/workload-type": "batch", "app": name},
        "annotations": {QUEUE: team, **annotations},
    }


def document(namespaces: dict[str, str]) -> dict[str, Any]:
    """The local stack's rendered document with the two test teams as its only teams."""
    rendered = copy.deepcopy(render_opa_data(load_stack_config(stack_file("local"))))
    template = next(iter(rendered["teams"].values()))
    rendered["teams"] = {
        team: {
            **copy.deepcopy(template),
            "namespaces": [ns for ns, t in namespaces.items() if t == team],
            "queue": team,
            "guaranteed": {},
            "quota": {"nvidia.com/gpu": POOL_GPUS},
            "allowed_models": ["h100-80gb"],
            "default_model": "h100-80gb",
        }
        for team in TEAMS
    }
    rendered["namespaces"] = dict(namespaces)
    rendered["controller"]["opa_token_file"] = None
    return rendered


def h100_held(kube: LocalCluster) -> dict[str, int]:
    """GPUs held on H100 nodes by namespace (pods bound and not being deleted)."""
    nodes = {
        n["metadata"]["name"] for n in kube.get_json("nodes", "-l", f"{PRODUCT}={H100}")["items"]
    }
    held: dict[str, int] = {}
    for pod in kube.get_json("pods", "-A")["items"]:
        spec, status = pod["spec"], pod.get("status", {})
        if spec.get("nodeName") not in nodes or pod["metadata"].get("deletionTimestamp"):
            continue
        if status.get("phase") in ("Succeeded", "Failed"):
            continue
        gpus = sum(
            int((c.get("resources", {}).get("limits") or {}).get("nvidia.com/gpu", 0))
            for c in spec["containers"]
        )
        if gpus:
            ns = pod["metadata"]["namespace"]
            held[ns] = held.get(ns, 0) + gpus
    return held


@pytest.fixture
def teams(kube: LocalCluster, volcano: Any) -> Iterator[dict[str, str]]:
    """Two namespaces, one per team, and the teams' Volcano Queues (weights 1 and 3)."""
    suffix = uuid.uuid4().hex[:6]
    namespaces = {f"{team}-{suffix}": team for team in TEAMS}
    for ns in namespaces:
        kube.kubectl("create", "namespace", ns)
    kube.apply(
        [
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": team},
                "spec": {"weight": weight, "reclaimable": True},
            }
            for team, weight in TEAMS.items()
        ]
    )
    try:
        yield namespaces
    finally:
        for ns in namespaces:
            kube.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_shares_converge_to_the_queue_weights(
    kube: LocalCluster, volcano: Any, opa_server: OpaServer, teams: dict[str, str]
) -> None:
    ns_a, ns_b = sorted(teams)  # fsa-..., fsb-...
    # The pool must be free of other tests' work for the shares to be of 64 GPUs.
    try:
        wait_for("a free H100 pool", lambda: not h100_held(kube), timeout=90)
    except AssertionError as error:
        raise AssertionError(f"{error}: held by {h100_held(kube)}") from None
    config = document(teams)
    opa_server.put_data("fleetplane/config", config)
    opa_server.put_data("fleetplane/spend", {})
    kube.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": meta(f"a-{i}", ns_a, "fsa"),
                "spec": pod_spec(),
            }
            for i in range(8)
        ]
    )
    wait_for("fsa holding the pool", lambda: h100_held(kube).get(ns_a) == POOL_GPUS)
    # Checkpoints a second apart, a-0 longest ago, all after the pods started (work lost is
    # bounded by the run time): the least work is lost with a-7, then a-6...
    time.sleep(10)
    stamp = int(time.time())
    for i in range(8):
        kube.kubectl(
            "annotate",
            "pod",
            f"a-{i}",
            "-n",
            ns_a,
            f"fleetplane.dev/last-checkpoint={stamp - 8 + i}",
        )
    kube.apply(
        [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": meta("b", ns_b, "fsb"),
                "spec": {
                    "replicas": 8,
                    "selector": {"matchLabels": {"app": "b"}},
                    "template": {"metadata": meta("b", ns_b, "fsb"), "spec": pod_spec()},
                },
            }
        ]
    )
    wait_for(
        "fsb's eight replicas pending",
        lambda: len(kube.get_json("pods", "-n", ns_b, "-l", "app=b")["items"]) == 8,
    )
    time.sleep(3)  # a scheduling cycle of Volcano: nothing of fsb can be placed
    assert h100_held(kube).get(ns_b, 0) == 0

    client = KubeClient.from_kubeconfig(str(kube.kubeconfig))
    fleet = parse_config(config)

    def one_pass(*, dry_run: bool = False) -> tuple[list[dict[str, Any]], str]:
        out, logs = io.StringIO(), io.StringIO()
        configure("debug", logs)
        try:
            run_pass(
                kube=client,
                fleet=fleet,
                settings=Settings(
                    prometheus_url=f"http://127.0.0.1:{free_port()}",  # none: not read
                    opa_url=opa_server.url,
                    lease_namespace=ns_a,
                    preemption_pending_seconds=0,
                    request_timeout_seconds=5,
                    dry_run=dry_run,
                ),
                concerns=("fairshare",),
                out=out,
            )
        finally:
            configure("debug", sys.stderr)
        lines = [json.loads(line) for line in logs.getvalue().splitlines() if line.strip()]
        return lines, out.getvalue()

    def evicted(lines: list[dict[str, Any]]) -> list[str]:
        return sorted(line["target"] for line in lines if line["event"] == "fairshare.evict")

    try:
        lines, out = one_pass(dry_run=True)
        assert out.count("DRY-RUN fairshare: would evict") == 6, out
        assert evicted(lines) == []
        assert h100_held(kube).get(ns_a) == POOL_GPUS

        lines, _ = one_pass()  # pass 1 takes back
        shares = {
            line["team"]: (line["held"], line["pending"], line["deserved"])
            for line in lines
            if line["event"] == "fairshare.share"
        }
        assert shares == {"fsa": (64, 0, 16.0), "fsb": (0, 64, 48.0)}
        # least work lost first: the six most recently checkpointed
        assert evicted(lines) == [f"{ns_a}/a-{i}" for i in range(2, 8)]
        denied = [line for line in lines if line["event"] == "fairshare.victim.denied"]
        assert denied == []
        reasons = {
            e["involvedObject"]["name"]: e["message"]
            for e in kube.get_json("events", "-n", ns_a)["items"]
            if e["reason"] == "FairShareReclaimed"
        }
        assert sorted(reasons) == [f"a-{i}" for i in range(2, 8)]
        assert "team fsb holds 0 of its deserved 48.0" in reasons["a-7"]

        wait_for(
            "Volcano placing six of fsb's replicas",
            lambda: h100_held(kube) == {ns_a: 16, ns_b: 48},
        )
        lines, _ = one_pass()  # pass 2: at the weights, nothing to take
        assert evicted(lines) == []
        final = {
            line["team"]: (line["held"], line["deserved"])
            for line in lines
            if line["event"] == "fairshare.share"
        }
        assert final == {"fsa": (16, 16.0), "fsb": (48, 48.0)}
        held = h100_held(kube)
        assert (held[ns_a] / POOL_GPUS, held[ns_b] / POOL_GPUS) == (0.25, 0.75)
    finally:
        client.close()
