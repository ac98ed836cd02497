"""The typed contract of `data.fleetplane.config` (fleet/contract): every stack's document
decodes without a problem and encodes back to itself; the decoder names every problem with its
path; the contract's defaults are the configuration model's."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from fleet import config as model
from fleet import contract
from fleet.config import FleetConfig
from fleet.render import config_document, from_model, render_opa_data


def test_every_stack_decodes_and_encodes_back_to_the_same_document(
    stack_fleets: dict[str, FleetConfig],
) -> None:
    for name, fleet in stack_fleets.items():
        rendered = json.loads(json.dumps(render_opa_data(fleet)))
        decoded = contract.decode_document(rendered)
        assert decoded.problems == (), name
        assert decoded.document == config_document(fleet), name
        assert json.dumps(contract.encode_document(decoded.document)) == json.dumps(rendered)


def test_the_decoder_reports_every_problem_with_its_path(
    stack_fleets: dict[str, FleetConfig],
) -> None:
    document: dict[str, Any] = copy.deepcopy(render_opa_data(stack_fleets["local"]))
    team = next(iter(document["teams"]))
    pool = next(iter(document["pools"]))
    wt = next(iter(document["workload_types"]))
    document["teams"][team]["monthly_budget_usd"] = "a lot"
    document["pools"][pool]["max_unavailable"] = "ten percent"
    document["workload_types"][wt]["capacity"] = "anywhere"
    document["upgrade"]["max_parallel"] = 0
    document["lifetime"]["busy_util_percent"] = 120
    document["controller"]["dry_run"] = "yes"
    document["namespaces"]["stray"] = "ghosts"
    del document["models"]
    decoded = contract.decode_document(document)
    assert sorted(path for path, _ in decoded.problems) == sorted(
        [
            f"teams.{team}.monthly_budget_usd",
            f"pools.{pool}.max_unavailable",
            f"workload_types.{wt}.capacity",
            "upgrade.max_parallel",
            "lifetime.busy_util_percent",
            "controller.dry_run",
            "namespaces.stray",
            "models",
        ]
    )
    # The default stands in for each bad value, the good ones are kept.
    assert decoded.document.upgrade.max_parallel == 1
    assert decoded.document.pools[pool].model == document["pools"][pool]["model"]


def test_a_document_without_the_optional_sections_takes_their_defaults() -> None:
    decoded = contract.decode_document(
        {"namespaces": {}, "teams": {}, "models": {}, "workload_types": {}, "budget": {}}
    )
    assert decoded.problems == ()
    assert decoded.document == contract.ConfigDocument()
    assert contract.decode_document({}).lines() == [
        "namespaces: must be an object",
        "teams: must be an object",
        "models: must be an object",
        "workload_types: must be an object",
        "budget: must be an object",
    ]


@pytest.mark.parametrize(
    ("section", "defaults"),
    [
        (contract.IdleRule, model.IdleConfig()),
        (contract.Approval, model.ApprovalConfig()),
        (contract.Budget, model.BudgetConfig()),
        (contract.Health, model.HealthConfig()),
        (contract.Lifetime, model.LifetimeConfig()),
    ],
)
def test_the_contracts_defaults_are_the_configuration_models(section: Any, defaults: Any) -> None:
    """A document rendered before a setting existed reads as if rendered with its default."""
    assert section() == from_model(section, defaults.model_dump())


def test_a_setting_of_the_model_the_contract_lacks_is_refused() -> None:
    """A new setting must be added to the contract too, or the rendering fails."""
    with pytest.raises(ValueError, match="unknown \\['brand_new'\\]"):
        from_model(contract.Budget, {"warn_ratio": 0.8, "deny_ratio": 1.0, "brand_new": 1})
