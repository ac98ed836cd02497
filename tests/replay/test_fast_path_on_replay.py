"""The replay's own admission reviews take the gate's fast path, which answers them as the full
rules do (policies/fleetplane/admission/fast.rego).

Every pod the replay submits selects its GPU models: one model by node selector, several (or
every model of the fleet, for a pod whose `gpu_spec` names none) by one required node affinity
expression `In`. Both shapes are the fast path's; the replay's speed depends on it (docs/replay.md,
"Speed"). Checked on the shipped scenarios over the default trace's node list, with pods of the
default trace and pods that name one, two or an unknown model, each under no spend, spend near
the warning line and spend over the budget, against the real OPA (`opa_server`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any

import orjson
import pytest

from localfleet.servers import OpaServer
from replay.node_pools import node_shapes
from replay.objects import job_for
from replay.opa import BatchClient
from replay.runner import trace_variables
from replay.scenarios import load_scenarios
from replay.settings import EPOCH
from replay.trace import load_trace
from replay.workloads import generate

pytestmark = pytest.mark.integration

# Both answers for each review, evaluated as replay/policy/batch.rego evaluates system.main.
COMPARE_POLICY = """package replay.fastcheck

import data.fleetplane.admission
import data.system

answers := [[fast(item), full] |
	some item in input.admission
	full := system.full_response with input as item.review
		with time.now_ns as item.now_ns
		with data.fleetplane.spend as input.spend
]

# The fast path's response, null where it leaves the review to the full rules.
fast(item) := response if {
	response := admission.fast_response with input as item.review
		with time.now_ns as item.now_ns
		with data.fleetplane.spend as input.spend
} else := null
"""

NOW_NS = int((EPOCH + 3 * 86400) * 1e9)
MONTH = dt.datetime.fromtimestamp(NOW_NS / 1e9, tz=dt.UTC).strftime("%Y-%m")
NAMED = [(), ("T4",), ("V100M16", "V100M32"), ("A10", "G2", "P100"), ("NO-SUCH-GPU",)]
"""gpu_spec of the extra pods: any model, one, two, three, one the catalog does not know."""


def _reviews(scenario: Any, workloads: list[Any]) -> list[dict[str, Any]]:
    return [job_for(w, scenario).review() for w in workloads]


@pytest.fixture(scope="module")
def replay_inputs() -> tuple[list[Any], list[Any]]:
    trace = load_trace()
    variables = trace_variables(trace)
    scenarios = load_scenarios(variables=variables, shapes=node_shapes(trace.nodes))
    sample = trace.pods[:: max(1, len(trace.pods) // 60)]
    base = trace.pods[0]
    named = [replace(base, name=f"named-{i}", gpu_spec=spec) for i, spec in enumerate(NAMED)]
    workloads = generate(sample + named, scenarios.assignment)
    return scenarios.scenarios, workloads


def _answers(client: BatchClient, reviews: list[dict[str, Any]], spend: Any) -> list[Any]:
    body = {
        "input": {
            "admission": [{"review": r, "now_ns": NOW_NS} for r in reviews],
            "spend": spend,
        }
    }
    answer = client._request(
        "POST", "/v1/data/replay/fastcheck/answers", orjson.dumps(body), "application/json"
    )
    result = answer.get("result")
    assert isinstance(result, list) and len(result) == len(reviews), answer
    return result


def test_the_fast_path_answers_the_replays_reviews_as_the_full_rules(
    opa_server: OpaServer, replay_inputs: tuple[list[Any], list[Any]]
) -> None:
    scenarios, workloads = replay_inputs
    client = BatchClient(opa_server.url)
    client._request("PUT", "/v1/policies/replay-fastcheck", COMPARE_POLICY.encode(), "text/plain")
    affinity_seen = selector_seen = 0
    try:
        for scenario in scenarios:
            client.put_config(scenario.document)
            reviews = _reviews(scenario, workloads)
            budgets = {
                team: t["monthly_budget_usd"] for team, t in scenario.document["teams"].items()
            }
            spends = {
                "none": {},
                "near the warning line": {
                    team: {"month": MONTH, "usd": 0.79 * usd} for team, usd in budgets.items()
                },
                "over the budget": {
                    team: {"month": MONTH, "usd": 1.2 * usd} for team, usd in budgets.items()
                },
            }
            for spend_name, spend in spends.items():
                answers = _answers(client, reviews, spend)
                for review, (fast, full) in zip(reviews, answers, strict=True):
                    where = (scenario.name, spend_name, review["request"]["name"])
                    if fast is not None:
                        assert fast == full, where
                    spec = review["request"]["object"]["spec"]
                    if spend_name == "none" and full["allowed"]:
                        # Every pod the full rules allow without spend is the fast path's.
                        assert fast is not None, (where, spec)
                        if "affinity" in spec:
                            affinity_seen += 1
                        else:
                            selector_seen += 1
    finally:
        client._request("DELETE", "/v1/policies/replay-fastcheck", b"", "text/plain")
        client.close()
        opa_server.put_data("fleetplane/spend", {})
    # Both shapes were allowed and taken by the fast path.
    assert affinity_seen > 0 and selector_seen > 0, (affinity_seen, selector_seen)
