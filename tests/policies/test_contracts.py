"""The policies and the Python side agree: the Rego test fixture is generated from the JSON
fixture, which is a document of the contract (fleet/contract); the gate's schema check names
contract fields; the Rego keys are fleet/labels.py's."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import typing
from pathlib import Path
from typing import Any, cast

import pytest

from fleet import contract, labels
from fleet.contract import codec, fleet_sections
from policyreview.diff import DEFAULT_WORKLOADS
from tests.policies import config_fixture
from tests.policies.conftest import FIXTURES, Gate
from tests.policies.corpus import REVIEWS, render, reviews, write
from tests.policies.lifetime_cases import CORPUS_WORKLOADS

ROOT = Path(__file__).resolve().parents[2]
OPA = ROOT / "tools" / "bin" / "opa"


@pytest.mark.integration
def test_rego_fixture_is_the_json_fixture(fleet_config: dict[str, Any]) -> None:
    if not OPA.exists():
        pytest.fail(f"{OPA} is missing; run `make tools`")
    result = subprocess.run(
        [str(OPA), "eval", "--format=json", "-d", "policies", "data.fleetplane.testing.config"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    rego_config = json.loads(result.stdout)["result"][0]["expressions"][0]["value"]
    assert rego_config == json.loads((FIXTURES / "config.json").read_text()) == fleet_config


@pytest.mark.integration
def test_rego_keys_are_the_python_keys(gate: Gate) -> None:
    assert gate.server.query("fleetplane/lib/keys") == labels.KEYS
    assert gate.server.query("fleetplane/lib/spot_node_labels") == labels.SPOT_NODE_LABELS
    assert gate.server.query("fleetplane/lib/spot_taint") == labels.SPOT_TAINT
    assert set(gate.server.query("fleetplane/lib/accelerator_resources")) == set(
        labels.ACCELERATOR_RESOURCES
    )
    assert gate.server.query("fleetplane/lib/mig_resource_prefix") == labels.MIG_RESOURCE_PREFIX


def test_review_corpus_is_current() -> None:
    """policyreview/corpus/reviews/ is the case table rendered; after changing
    tests/policies/cases.py, rerun this test with FLEETPLANE_UPDATE_CORPUS=1 to rewrite it."""
    if os.environ.get("FLEETPLANE_UPDATE_CORPUS"):
        write()
    on_disk = {path.name: path.read_text() for path in REVIEWS.glob("*.json")}
    assert on_disk == {name: render(review) for name, review in reviews().items()}
    assert DEFAULT_WORKLOADS.read_text() == render(CORPUS_WORKLOADS)


def test_the_rego_fixture_is_generated_from_the_json_fixture() -> None:
    """policies/fleetplane/testing/config_test.rego is config.json rendered; after changing the
    JSON, rerun this test with FLEETPLANE_UPDATE_CORPUS=1 to rewrite it."""
    if os.environ.get("FLEETPLANE_UPDATE_CORPUS"):
        config_fixture.write()
    assert config_fixture.REGO_FIXTURE.read_text(encoding="utf-8") == config_fixture.render()


def contract_keys(cls: type, value: Any, at: str = "") -> list[str]:
    """Paths of `value` (a JSON object of contract type `cls`) the contract does not define."""
    hints = typing.get_type_hints(cls)
    fields = {codec.key_of(f): f for f in dataclasses.fields(cls)}
    unknown = []
    for key, item in value.items():
        path = f"{at}.{key}" if at else key
        if key not in fields:
            unknown.append(path)
            continue
        hint = hints[fields[key].name]
        options = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
        inner = next((o for o in options if dataclasses.is_dataclass(o)), None)
        if typing.get_origin(hint) is dict:
            inner = typing.get_args(hint)[1]
            if dataclasses.is_dataclass(inner):
                for name, entry in item.items():
                    unknown += contract_keys(cast(type, inner), entry, f"{path}.{name}")
        elif inner is not None and isinstance(item, dict):
            unknown += contract_keys(cast(type, inner), item, path)
    return unknown


def test_the_json_fixture_is_a_document_of_the_contract(fleet_config: dict[str, Any]) -> None:
    """The fixture decodes without a problem and names only keys of the contract, except the
    one the policies must show they no longer read."""
    assert contract.decode_document(fleet_config).problems == ()
    assert contract_keys(contract.ConfigDocument, fleet_config) == ["approval.approved_ids"]


# The Rego schema kinds (policies/fleetplane/admission/config.rego `conforms`) each contract
# type satisfies.
KINDS: dict[str, Any] = {
    "number": (int, float),
    "string": (str,),
    "boolean": (bool,),
    "number or null": (int | None, float | None),
    "strings": (tuple[str, ...],),
    "prices": (dict[str, float],),
    "capacity": (fleet_sections.Capacity,),
    "capacity type": (typing.get_type_hints(contract.Pool)["capacity_type"],),
    "pod security level": (fleet_sections.PodSecurity,),
}
SCHEMAS = {
    "type_schema": contract.WorkloadType,
    "pool_schema": contract.Pool,
    "team_schema": contract.Team,
    "model_schema": contract.Model,
    "platform_schema": contract.Platform,
}


def opa_eval(query: str) -> Any:
    if not OPA.exists():
        pytest.fail(f"{OPA} is missing; run `make tools`")
    result = subprocess.run(
        [str(OPA), "eval", "--format=json", "-d", "policies", query],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(result.stdout)["result"][0]["expressions"][0]["value"]


@pytest.mark.integration
def test_the_rego_schema_check_is_held_against_the_contract() -> None:
    """Every field the gate's schema check names is a field of the contract, of a type whose
    values the check accepts (and only those, for the enumerations)."""
    schemas = opa_eval(
        "{name: data.fleetplane.admission[name] | some name in " + json.dumps(list(SCHEMAS)) + "}"
    )
    wrong = []
    for name, schema in schemas.items():
        cls = SCHEMAS[name]
        hints = typing.get_type_hints(cls)
        keys = {codec.key_of(f): f.name for f in dataclasses.fields(cls)}
        for key, kind in schema.items():
            hint = hints.get(keys.get(key, ""))
            accepted = KINDS[kind]
            bare = [a for a in typing.get_args(hint) if a is not type(None)]
            if hint not in accepted and not (len(bare) == 1 and bare[0] in accepted):
                wrong.append(f"{name}.{key}: {kind} but the contract has {hint}")
    assert wrong == []
    for kind in ("capacity", "capacity type", "pod security level"):
        values = list(typing.get_args(KINDS[kind][0]))
        candidates = json.dumps([*values, "other"])
        conforming = opa_eval(
            f"[v | some v in {candidates}; data.fleetplane.admission.conforms(v, {json.dumps(kind)})]"
        )
        assert conforming == values, kind
