"""The admission gate's fast path against its full rules, on the real OPA server.

fleetplane.admission.fast_response answers the common case with a fraction of the work: the
reviews it proves allowed, and those that break only the priority-class or idle-timeout rules.
Its contract is one-way: wherever it answers, the full rules give the very same response
(system.full_response: allowed, messages and warnings), so system.main, which answers from the
fast path first, answers as they would; fast_allowed likewise implies that the full rules
allow, with fast_warnings. Checked here on every review of the corpus, on
requests generated from the trace, and on a single-field mutation of each of them that aims at
one rule, each under several spend documents; plus a floor on how much of the clean traffic the
fast path takes, so that it cannot quietly stop working.
"""

from __future__ import annotations

import copy
import http.client
import json
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from localfleet import servers
from policyreview.diff import generate_from_trace
from tests.policies.conftest import FIXTURES, current_month, production_shaped_trace

pytestmark = pytest.mark.integration

Json = dict[str, Any]


def _template(review: Json) -> Json | None:
    """The first pod template of a review's object, wherever its kind keeps it."""
    obj = review.get("request", {}).get("object")
    kind = review.get("request", {}).get("kind", {}).get("kind")
    if not isinstance(obj, dict):
        return None
    spec = obj.get("spec", {})
    if kind == "Pod":
        return obj
    if kind in ("Deployment", "StatefulSet", "ReplicaSet") or (
        kind == "Job" and review["request"]["kind"].get("group") == "batch"
    ):
        return spec.get("template")
    if kind == "CronJob":
        return spec.get("jobTemplate", {}).get("spec", {}).get("template")
    tasks = spec.get("tasks") or [{}]
    return tasks[0].get("template")


def _main(template: Json) -> Json:
    return template["spec"]["containers"][0]


def _set_limit(value: Any) -> Callable[[Json], None]:
    def change(t: Json) -> None:
        resources = _main(t).setdefault("resources", {})
        limits = resources.setdefault("limits", {})
        key = next((k for k in limits if k in ("nvidia.com/gpu", "google.com/tpu")), None)
        limits[key or "nvidia.com/gpu"] = value

    return change


def _models_by_affinity(values: list[str]) -> Callable[[Json], None]:
    """The template accepts these GPU models by one required node affinity expression `In`
    (the replay's pods' shape), its node selector keeping everything but the model label."""

    def change(t: Json) -> None:
        selector = t["spec"].get("nodeSelector") or {}
        t["spec"]["nodeSelector"] = {
            k: v for k, v in selector.items() if k != "nvidia.com/gpu.product"
        }
        expression = {"key": "nvidia.com/gpu.product", "operator": "In", "values": values}
        t["spec"]["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [expression]}]
                }
            }
        }

    return change


H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-40GB"

MUTATIONS: dict[str, Callable[[Json], None]] = {
    "privileged": lambda t: _main(t).update(securityContext={"privileged": True}),
    "docker hub image": lambda t: _main(t).update(image="python:3.12"),
    "lookalike registry": lambda t: _main(t).update(image="nvcr.io.example.com/x:1"),
    "no priority class": lambda t: t["spec"].pop("priorityClassName", None),
    "another priority class": lambda t: t["spec"].update(priorityClassName="fleetplane-notebook"),
    "node name": lambda t: t["spec"].update(nodeName="gpu-0"),
    "host path": lambda t: t["spec"].update(volumes=[{"name": "h", "hostPath": {"path": "/"}}]),
    "host pid": lambda t: t["spec"].update(hostPID=True),
    "fractional limit": _set_limit("1.5"),
    "numeric limit": _set_limit(2),
    "huge limit": _set_limit("64"),
    "zero limit": _set_limit("0"),
    "differing request": lambda t: (
        _main(t).setdefault("resources", {}).update(requests={"nvidia.com/gpu": "3"})
    ),
    "mig slice": lambda t: (
        _main(t).setdefault("resources", {}).update(limits={"nvidia.com/mig-1g.10gb": "1"})
    ),
    "init container": lambda t: t["spec"].update(
        initContainers=[{"name": "i", "image": _main(t).get("image", "x")}]
    ),
    "unknown model": lambda t: t["spec"].update(
        nodeSelector={"nvidia.com/gpu.product": "NVIDIA-X"}
    ),
    "h100": lambda t: t["spec"].update(
        nodeSelector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    ),
    "no node selector": lambda t: t["spec"].pop("nodeSelector", None),
    "spot selector": lambda t: (
        t["spec"].setdefault("nodeSelector", {}).update({"fleetplane.dev/capacity-type": "spot"})
    ),
    "spot toleration": lambda t: t["spec"].update(
        tolerations=[{"key": "fleetplane.dev/capacity-type", "operator": "Exists"}]
    ),
    "tolerate everything": lambda t: t["spec"].update(tolerations=[{"operator": "Exists"}]),
    "no annotations": lambda t: t.setdefault("metadata", {}).pop("annotations", None),
    "no workload type": lambda t: t.setdefault("metadata", {}).update(labels={}),
    "unknown workload type": lambda t: t.setdefault("metadata", {}).update(
        labels={"fleetplane.dev/workload-type": "research"}
    ),
    "training type": lambda t: t.setdefault("metadata", {}).update(
        labels={"fleetplane.dev/workload-type": "training"}
    ),
    "long idle timeout": lambda t: t.setdefault("metadata", {}).update(
        annotations={"fleetplane.dev/idle-timeout-seconds": "999999"}
    ),
    "models by affinity": _models_by_affinity([H100, A100]),
    "one model by affinity": _models_by_affinity([A100]),
    "unknown model by affinity": _models_by_affinity([A100, "NVIDIA-X"]),
    "pod deadline": lambda t: t["spec"].update(activeDeadlineSeconds=60),
    "bad pod deadline": lambda t: t["spec"].update(activeDeadlineSeconds="1h"),
    "node affinity": lambda t: t["spec"].update(
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "nvidia.com/gpu.product",
                                    "operator": "In",
                                    "values": ["NVIDIA-H100-80GB-HBM3"],
                                }
                            ]
                        }
                    ]
                }
            }
        }
    ),
}

REVIEW_MUTATIONS: dict[str, Callable[[Json], None]] = {
    "update": lambda r: r["request"].update(operation="UPDATE", oldObject=None),
    "outside the teams": lambda r: r["request"].update(namespace="default"),
    "analytics": lambda r: r["request"].update(namespace="analytics"),
    "no uid": lambda r: r["request"].update(uid=""),
    "status subresource": lambda r: r["request"].update(subResource="status"),
}


def _reviews(config: Json, trace: Path) -> list[Json]:
    base = [json.loads(p.read_text()) for p in sorted((FIXTURES / "reviews").glob("*.json"))]
    base += [r.review for r in generate_from_trace(trace, config, seed=7)]
    reviews = list(base)
    # One review in eight is mutated, chosen by its uid, so adding a case to the corpus does
    # not change which others are; mutations of a review in a platform namespace test nothing
    # (nothing is judged there), so the sample leaves them out.
    sample = [
        r
        for r in base
        if zlib.crc32(r["request"]["uid"].encode()) % 8 == 0
        and r["request"]["namespace"] not in config["system_namespaces"]
    ]
    for i, review in enumerate(sample):
        for name, change in MUTATIONS.items():
            mutated = copy.deepcopy(review)
            template = _template(mutated)
            if not isinstance(template, dict) or not template.get("spec", {}).get("containers"):
                continue
            change(template)
            mutated["request"]["uid"] = f"{review['request']['uid']}+{name}"
            reviews.append(mutated)
        name, change = list(REVIEW_MUTATIONS.items())[i % len(REVIEW_MUTATIONS)]
        mutated = copy.deepcopy(review)
        change(mutated)
        reviews.append(mutated)
    return reviews


def _spend_documents(config: Json) -> dict[str, Json]:
    month = current_month()
    budgets = {team: t["monthly_budget_usd"] for team, t in config["teams"].items()}
    return {
        "none": {},
        "near the warning line": {
            team: {"month": month, "usd": 0.78 * usd} for team, usd in budgets.items()
        },
        "over budget": {team: {"month": month, "usd": 1.2 * usd} for team, usd in budgets.items()},
    }


def _evaluate(server: servers.OpaServer, reviews: list[Json]) -> list[Json]:
    """fast_allowed, fast_warnings and fast_response, and the full rules' allowed, warnings and
    response, per review (one keep-alive connection: a batch query with `with input as` costs
    OPA several times more)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    results: list[Json] = []
    try:
        for review in reviews:
            body = json.dumps({"input": review})
            result: Json = {}
            for rule in (
                "fleetplane/admission/fast_allowed",
                "fleetplane/admission/fast_warnings",
                "fleetplane/admission/fast_response",
                "fleetplane/admission/allowed",
                "fleetplane/admission/warning_list",
                "system/full_response",
            ):
                connection.request(
                    "POST",
                    f"/v1/data/{rule}",
                    body=body,
                    headers={"Content-Type": "application/json"},
                )
                response = connection.getresponse()
                payload = json.loads(response.read())
                assert response.status == 200, payload
                result[rule.rsplit("/", 1)[1]] = payload.get("result")
            results.append(result)
    finally:
        connection.close()
    return results


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return production_shaped_trace(tmp_path_factory.mktemp("trace") / "pods.csv", 150)


def test_fast_path_answers_as_the_full_rules(gate: Any, fleet_config: Json, trace: Path) -> None:
    reviews = _reviews(fleet_config, trace)
    assert len(reviews) > 800
    taken = allowed = warned = denied = 0
    try:
        for spend_name, spend in _spend_documents(fleet_config).items():
            gate.server.put_data("fleetplane/spend", spend)
            for review, result in zip(reviews, _evaluate(gate.server, reviews), strict=True):
                allowed += result["allowed"] is True
                fast = result["fast_response"]
                if fast is not None:
                    assert fast == result["full_response"], (review["request"]["uid"], spend_name)
                    denied += fast["allowed"] is False
                if result["fast_allowed"] is not True:
                    continue
                taken += 1
                uid = review["request"]["uid"]
                assert result["allowed"] is True, (
                    f"fast path allowed {uid} ({spend_name}): {result}"
                )
                assert result["fast_warnings"] == result["warning_list"], (uid, spend_name, result)
                warned += bool(result["warning_list"])
    finally:
        gate.server.put_data("fleetplane/spend", {})
    # The fast path takes most allowed reviews (the rest use init containers, MIG slices,
    # node affinity of other shapes than one expression `In` on the model label, or several
    # templates, which only the full rules handle), warnings too.
    assert taken >= 0.6 * allowed, (taken, allowed)
    assert warned > 0
    # ... and denies the reviews that break only the priority-class or idle-timeout rules.
    assert denied > 0


def test_mutations_reach_the_rules(fleet_config: Json) -> None:
    """The mutations change what they aim at (a typo in a lambda would test nothing)."""
    reviews = [
        json.loads((FIXTURES / "reviews" / name).read_text())
        for name in ("training-pod.json", "notebook-statefulset.json")
    ]
    for name, change in MUTATIONS.items():
        changed = 0
        for review in reviews:
            mutated = copy.deepcopy(review)
            change(_template(mutated) or {})
            changed += mutated != review
        assert changed, name


def test_reviews_cover_every_kind(fleet_config: Json, trace: Path) -> None:
    kinds = {r["request"]["kind"]["kind"] for r in _reviews(fleet_config, trace) if "request" in r}
    assert {"Pod", "Deployment", "StatefulSet", "Job", "CronJob"} <= kinds
