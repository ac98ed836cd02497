"""A 100,000-pod fleet's gate documents survive an OPA restart, and writing them costs OPA what
is written (issue 31).

The documents are made directly (not through kwok): every pod a bare pod, so its own workload
with its own reservation (the largest shape: 7 MB of reservations, where one ConfigMap key
holds 900 KiB), plus a scalable workload's record per ten pods. The controller publishes them
to a real OPA run as the gate's, keeps them in their ConfigMap parts on a real API server
(fleet/opa_shards.py), and a restarted OPA loaded from those parts, as the Deployment mounts
them, gives the same answers to the same reviews."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from controller.act.opa import Opa
from controller.act.opa_files import keep_shards
from controller.decide.reservations import Reservation, ReservationPlan, step_up
from controller.errors import NotFoundError
from controller.observe.kube import KubeClient, object_path
from fleet.opa_anchors import package_anchors
from fleet.opa_shards import SHARDS, shard_files
from fleet.project import policies_dir
from localfleet.controlplane import LocalCluster
from localfleet.servers import OpaServer, cpu_seconds
from tests.controller.conftest import KEPT, gate_opa, research_home_config, token_file
from tests.policies.builders import training

pytestmark = pytest.mark.integration

PODS = 100_000


def fleet_plan(config: dict[str, Any], now: float) -> ReservationPlan:
    """One reservation per pod, spread over the teams; team research's add up to 90% of its
    monthly budget, so a day of 8 H100 more is over the warning line and its message says how
    much is reserved."""
    teams = sorted(config["teams"])
    research = PODS // len(teams) + 1
    usd = 0.9 * config["teams"]["research"]["monthly_budget_usd"] / research
    plan = ReservationPlan()
    for i in range(PODS):
        team = teams[i % len(teams)]
        plan.reservations.append(
            Reservation(
                team=team,
                key=f"{i:08x}-0000-4000-8000-{i:012x}",
                kind="Pod",
                name=f"p-{i}",
                namespace=config["teams"][team]["namespaces"][0],
                usd=usd,
                expires_at=int(step_up(now + 86400 + (i % 48) * 3600)),
                uids=(),
                pods=1,
            )
        )
    return plan


def records(namespace: str) -> dict[str, dict[str, Any]]:
    return {
        namespace: {
            f"deployments.apps/w-{i}": {
                "uid": f"{i:08x}-1111-4000-8000-{i:012x}",
                "kind": "Deployment",
                "workload_type": "inference",
                "devices_per_replica": 1,
                "approval_id": None,
            }
            for i in range(PODS // 10)
        }
    }


def answers(opa: OpaServer, reviews: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for review in reviews:
        answer = requests.post(f"{opa.url}/", json=review, timeout=30)
        assert answer.status_code == 200, answer.text
        out.append(answer.json()["response"])
    return out


def test_a_100000_pod_fleet_survives_an_opa_restart(
    kube: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    config = research_home_config(namespace)
    now = time.time()
    reservations = fleet_plan(config, now).document()
    workloads = records(namespace)
    anchors = tmp_path / "anchors"  # as the gate's data ConfigMap (fleet/opa_anchors.py)
    anchors.mkdir()
    sources = [p.read_text() for p in policies_dir().rglob("*.rego")]
    (anchors / "data.json").write_text(json.dumps({"fleetplane": package_anchors(sources)}))
    kept = tmp_path / "controller-data"
    kept.mkdir()
    opa = gate_opa(tmp_path, config, anchors, kept)
    opa.start()
    client = KubeClient.from_kubeconfig(str(kube.kubeconfig))
    controller = Opa(opa.url, token_file=token_file(tmp_path), timeout=60)
    reviews = [
        training().in_namespace(namespace).in_queue("research").review(),
        training().in_namespace(namespace).in_queue("research").gpus(1).review(),
    ]
    try:
        empty = answers(opa, reviews)
        assert all(a["allowed"] for a in empty)
        controller.sync_data_here("fleetplane/reservations", reservations, 3, what="r")
        controller.sync_data_here("fleetplane/workloads", workloads, 2, what="w")
        before = answers(opa, reviews)
        assert before != empty  # the fleet's reservations are judged: the warning says them
        assert any("reserved" in w for a in before for w in a.get("warnings") or [])

        # a pass that changes one workload writes one operation, and costs OPA little
        # (without the packages' anchors a one-operation write cost it 10-17 CPU-s here)
        pid = opa.pid()
        assert pid is not None
        spent = cpu_seconds(pid)
        team = reservations["research"]
        first = next(iter(team["workloads"]))
        team["workloads"][first] = {**team["workloads"][first], "usd": 1.0}
        assert controller.sync_data_here("fleetplane/reservations", reservations, 3, what="r") == 1
        assert cpu_seconds(pid) - spent < 2.0

        # an hour's step moves every entry: one whole write, not a patch of 100,000 operations
        # (which OPA applies in a time that grows faster than the operations: minutes)
        moved = copy.deepcopy(reservations)
        for entry in moved["research"]["workloads"].values():
            entry["expires_at"] = entry["expires_at"] + 3600
        spent = cpu_seconds(pid)
        assert controller.sync_data_here("fleetplane/reservations", moved, 3, what="r") == 1
        assert cpu_seconds(pid) - spent < 5.0
        assert controller.sync_data_here("fleetplane/reservations", reservations, 3, what="r") == 1

        # kept for OPA's next start in ConfigMap parts, none over a ConfigMap's limit
        size, written = keep_shards(client, f"{namespace}/{KEPT}", "reservations", reservations)
        assert size > 5_000_000 and written == SHARDS
        keep_shards(client, f"{namespace}/{KEPT}", "workloads", workloads)
        assert keep_shards(client, f"{namespace}/{KEPT}", "reservations", reservations) == (
            size,
            0,
        )  # nothing changed: no part written

        def data(name: str) -> dict[str, str] | None:
            try:
                return client.get(object_path("v1", "configmaps", namespace, name))["data"]
            except NotFoundError:
                return None

        for path, text in shard_files(KEPT, data).items():
            target = kept / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        before = answers(opa, reviews)

        opa.restart()  # a new process: an empty store, loaded from the files again
        after = answers(opa, reviews)
        assert after == before
        held = controller.sync_data_here("fleetplane/reservations", reservations, 3, what="r")
        assert held == 0  # the restarted replica holds the whole document: nothing to write
    finally:
        controller.close()
        opa.stop()
        client.close()
