"""The policies and the Python side agree: the Rego test fixture is the JSON fixture, and the
Rego keys are fleet/labels.py's."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fleet import labels
from tests.policies.conftest import FIXTURES, Gate
from tests.policies.corpus import REVIEWS, render, reviews, write

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
