"""The scenario's TrainJob and RayJob (localfleet.scenario_operators) through the real parts of
`make up`: the gate (the project's policies in OPA behind the rendered webhook), the real
operators and Volcano. Both are admitted as the team wrote them, and every pod their operators
make is admitted and placed by Volcano in the team's queue, each workload one gang."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fleet import labels
from fleet.config import FleetConfig
from localfleet.operators import LocalOperators
from localfleet.scenario import A100, GPU_TOLERATION, SPOT_TOLERATION
from localfleet.scenario_operators import submit_operator_work
from tests.components.live_gate import live_gate
from tests.localfleet.operator_kit import NS, delete, placed, rayjob_cluster

pytestmark = pytest.mark.integration

PRIORITY = "fleetplane-training"
SCENARIO = {"fleetplane.dev/scenario": "test"}


def funded(fleet: FleetConfig) -> FleetConfig:
    """The test fleet with team vt-beta's budget at the scenario's team's (ml-research's in the
    local stack): the JobSet the Trainer makes is priced whole, with its runtime's retries."""
    teams = [
        t.model_copy(update={"monthly_budget_usd": 50000}) if t.name == NS else t
        for t in fleet.teams
    ]
    return fleet.model_copy(update={"teams": teams})


def test_the_scenarios_trainjob_and_rayjob_pass_the_gate_and_gang_in_volcano(
    operators: LocalOperators,
    volcano: Any,
    tmp_path: Path,
) -> None:
    """`submit_operator_work` as the scenario calls it (spot A100s), in team vt-beta."""
    kube = operators.cluster
    with live_gate(kube, funded(volcano.fleet), tmp_path):
        try:
            refused = submit_operator_work(
                kube,
                namespace=NS,
                queue=NS,
                node_selector={labels.GPU_PRODUCT: A100, labels.CAPACITY_TYPE: "spot"},
                priority_class=PRIORITY,
                scenario_labels=SCENARIO,
                tolerations=[GPU_TOLERATION, SPOT_TOLERATION],
            )
            assert refused == []
            tj, rj = "tj-finetune", "rj-eval"
            nodes = placed(kube, f"jobset.sigs.k8s.io/jobset-name={tj}", 2)
            assert {p["spec"]["priorityClassName"] for p in nodes} == {PRIORITY}
            group = kube.get_json("podgroup", tj, "-n", NS)
            assert group["spec"]["minMember"] == 2 and group["spec"]["queue"] == NS
            cluster = rayjob_cluster(kube, rj)
            ray = placed(kube, f"ray.io/cluster={cluster},ray.io/node-type in (head,worker)", 2)
            assert {p["spec"]["priorityClassName"] for p in ray} == {PRIORITY}
            # the submitter runs in the head pod (SidecarMode): no pod of its own to wait for a
            # CPU node the local fleet does not have
            (head,) = [p for p in ray if p["metadata"]["labels"]["ray.io/node-type"] == "head"]
            assert len(head["spec"]["containers"]) == 2, head["spec"]["containers"]
            assert head["status"]["phase"] == "Running"
            # KubeRay's submitter Job is named after the RayJob: none in this mode
            assert kube.kubectl("get", "job", rj, "-n", NS, check=False).returncode != 0
            group = kube.get_json("podgroup", f"ray-{rj}-pg", "-n", NS)
            assert group["spec"]["queue"] == NS
            assert group["spec"]["priorityClassName"] == PRIORITY
        finally:
            delete(kube, "trainjob", "tj-finetune")
            delete(kube, "rayjob", "rj-eval")
