"""The service's protocol: Volcano's PrioritizeRequest as vc-scheduler's encoding/json writes
it, the answer it decodes (nodeScore, errorMessage), the learned workload, and errors."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fleet import labels
from fleet.placement import GPU_SHARE_ANNOTATION, METRICS_PATH, SCORE_SCALE
from localfleet.placement import PlacementServer
from placement import fgd
from placement.service import Scorer
from placement.volcano_json import read_nodes, read_task
from placement.workload import Workload, read_seed


def resource(cpu: int, memory: int, gpus: float = 0) -> dict[str, Any]:
    scalars = {labels.GPU_RESOURCE: gpus * 1000} if gpus else None
    return {"MilliCPU": cpu, "Memory": memory, "ScalarResources": scalars, "MaxTaskNum": 0}


def pod(name: str, *, annotations: dict[str, str] | None = None, spec: dict | None = None) -> dict:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "annotations": annotations or {}},
        "spec": spec or {"containers": [{"name": "main"}]},
    }


def task(name: str, cpu: int, gpus: float = 0, **pod_fields: Any) -> dict[str, Any]:
    return {
        "UID": f"uid-{name}",
        "Name": name,
        "Namespace": "t",
        "Resreq": resource(cpu, 1 << 30, gpus),
        "InitResreq": resource(cpu, 1 << 30, gpus),
        "Pod": pod(name, **pod_fields),
    }


def node(
    name: str,
    *,
    gpus: int,
    idle_gpus: int,
    cpu: int,
    idle_cpu: int,
    model: str,
    tasks: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "Name": name,
        "Node": {"metadata": {"name": name, "labels": {labels.GPU_PRODUCT: model}}},
        "State": {"Phase": "Ready", "Reason": ""},
        "Idle": resource(idle_cpu, 1 << 40, idle_gpus),
        "Used": resource(cpu - idle_cpu, 0, gpus - idle_gpus),
        "Allocatable": resource(cpu, 1 << 40, gpus),
        "Capacity": resource(cpu, 1 << 40, gpus),
        "Tasks": tasks or {},
        "Others": None,
        "Generation": 3,
    }


def test_a_cpu_only_pod_goes_where_no_gpu_is_idle() -> None:
    """FGD's point: a pod without GPUs should not take the CPU idle GPUs need (with CPU to
    spare for every typical pod after it, both nodes would score alike: 50)."""
    scorer = Scorer(Workload(read_seed(), window=0))
    answer = scorer.prioritize(
        {
            "task": task("cpu-only", 8000),
            "nodes": [
                node("idle-gpus", gpus=8, idle_gpus=8, cpu=96000, idle_cpu=12000, model="V100M16"),
                node("gpus-taken", gpus=8, idle_gpus=0, cpu=96000, idle_cpu=40000, model="V100M16"),
            ],
        }
    )
    assert answer["errorMessage"] == ""
    scores = answer["nodeScore"]
    assert scores["gpus-taken"] > scores["idle-gpus"]
    assert all(s % SCORE_SCALE == 0 for s in scores.values())


def test_shares_are_counted_from_the_pods_on_a_node_and_scored_by_gpu() -> None:
    shared = task("s1", 1000, annotations={GPU_SHARE_ANNOTATION: "600"})
    table = read_nodes(
        [
            node(
                "n",
                gpus=2,
                idle_gpus=2,
                cpu=32000,
                idle_cpu=31000,
                model="T4",
                tasks={"uid-s1": shared},
            ),
        ]
    )
    assert table.gpu_left.tolist() == [[400, 1000]]
    asking = read_task(task("s2", 1000, annotations={GPU_SHARE_ANNOTATION: "500"}))
    assert asking.demand.shared and asking.demand.gpu_milli == 500
    typical = fgd.typical_pods([(fgd.Shape(1000, 500, 1), 1.0)])
    scores, gpu = fgd.scores(typical, table.for_typical(typical), asking.demand)
    assert gpu.tolist() == [1] and scores[0] >= 0  # the 400 left cannot hold 500


def test_gpu_models_come_from_the_selector_or_required_affinity() -> None:
    selector = read_task(task("a", 1000, 1, spec={"nodeSelector": {labels.GPU_PRODUCT: "A10"}}))
    assert selector.gpu_spec == ("A10",)
    term = {"key": labels.GPU_PRODUCT, "operator": "In", "values": ["V100M32", "P100"]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [term]}]
            }
        }
    }
    assert read_task(task("b", 1000, 1, spec={"affinity": affinity})).gpu_spec == (
        "P100",
        "V100M32",
    )
    assert read_task(task("c", 1000, 2)).demand.num_gpu == 2


def test_the_workload_moves_from_the_seed_to_the_clusters_pods() -> None:
    seed = [(fgd.Shape(1000, 1000, 1), 10.0), (fgd.Shape(2000, 0, 0), 10.0)]
    workload = Workload(seed, window=100, prior=10)
    assert len(workload.typical().weight) == 2
    for i in range(100):
        workload.observe(f"t{i}", fgd.Shape(4000, 1000, 8))
    workload.observe("t0", fgd.Shape(1, 0, 0))  # seen already: not counted again
    typical = workload.typical()
    assert workload.learned == 100
    # 100 learned pods against the seed's two shapes weighing 5 each: the learned shape and
    # one of the seed's cover 95 %.
    assert typical.num_gpu[0] == 8 and typical.weight[0] == pytest.approx(100 / 105)
    assert len(typical.weight) == 2
    frozen = Workload(seed, window=0)
    frozen.observe("x", fgd.Shape(4000, 1000, 8))
    assert frozen.learned == 0


@pytest.mark.integration
def test_the_service_answers_over_http_and_refuses_what_volcano_does_not_send(
    tmp_path: Path,
) -> None:
    with PlacementServer(work_dir=tmp_path / "placement") as service:
        body = {
            "task": task("w", 4000, 1),
            "nodes": [
                node("a", gpus=8, idle_gpus=8, cpu=96000, idle_cpu=96000, model="V100M16"),
                node("b", gpus=8, idle_gpus=1, cpu=96000, idle_cpu=12000, model="V100M16"),
            ],
        }
        answer = post(service.url + "/prioritize", body)
        assert set(answer["nodeScore"]) == {"a", "b"} and answer["errorMessage"] == ""
        with pytest.raises(urllib.error.HTTPError) as bad:
            post(service.url + "/prioritize", {"nodes": []})
        assert bad.value.code == 400
        with pytest.raises(urllib.error.HTTPError) as unknown:
            post(service.url + "/predicate", body)
        assert unknown.value.code == 404
        with urllib.request.urlopen(service.url + METRICS_PATH, timeout=5) as response:
            metrics = response.read().decode()
    assert 'fleetplane_placement_requests_total{verb="prioritize",outcome="ok"} 1' in metrics
    assert 'fleetplane_placement_requests_total{verb="prioritize",outcome="error"} 1' in metrics
    assert "fleetplane_placement_learned_pods 1" in metrics


def post(url: str, body: Any) -> Any:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_the_answer_breaks_fgds_integer_ties_by_best_fit() -> None:
    """Over the shipped seed, nodes whose FGD scores tie (the old answer: equal points,
    Volcano's random pick) are answered in best-fit order, a rank apart; FGD's order comes
    first."""
    scorer = Scorer(Workload(read_seed(), window=0))
    shapes = [(g, c) for g in (1, 2, 4, 8) for c in (6000, 10000, 14000, 20000, 30000, 60000)]
    candidates = [
        node(f"n{g}-{c}", gpus=8, idle_gpus=g, cpu=96000, idle_cpu=c, model="V100M16")
        for g, c in shapes
    ]
    answer = scorer.prioritize({"task": task("one-gpu", 4000, 1), "nodes": candidates})
    points = np.array([answer["nodeScore"][f"n{g}-{c}"] for g, c in shapes])
    typical = scorer.workload.typical()
    demand = read_task(task("x", 4000, 1)).demand
    scores, _ = fgd.scores(typical, read_nodes(candidates).for_typical(typical), demand)
    pairs = [(i, j) for i in range(len(shapes)) for j in range(len(shapes))]
    tied = [(i, j) for i, j in pairs if scores[i] == scores[j] and shapes[i][0] < shapes[j][0]]
    assert tied, "the nodes should include FGD ties between nodes with different free GPUs"
    for i, j in tied:
        assert points[i] >= points[j] + SCORE_SCALE, (shapes[i], shapes[j])
    for i, j in pairs:
        if scores[i] > scores[j]:
            assert points[i] >= points[j] + SCORE_SCALE, (shapes[i], shapes[j])
