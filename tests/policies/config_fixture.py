"""The policy tests' configuration, written once: policyreview/corpus/config.json is the
fixture, and the Rego tests' `data.fleetplane.testing.config` is generated from it
(policies/fleetplane/testing/config_test.rego), in `opa fmt`'s layout.

    FLEETPLANE_UPDATE_CORPUS=1 pytest tests/policies/test_contracts.py -k fixture   # rewrite it

A test keeps the file in step with the JSON, and another holds the JSON against the typed
contract of the document (fleet/contract).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from policyreview.diff import CORPUS_DIR

ROOT = Path(__file__).resolve().parents[2]
JSON_FIXTURE = CORPUS_DIR / "config.json"
REGO_FIXTURE = ROOT / "policies" / "fleetplane" / "testing" / "config_test.rego"

HEADER = """\
# Generated from policyreview/corpus/config.json by tests/policies/config_fixture.py; do not
# edit: change the JSON and run
# FLEETPLANE_UPDATE_CORPUS=1 pytest tests/policies/test_contracts.py -k fixture
package fleetplane.testing

# METADATA
# description: The configuration every policy test runs against.
"""


def rego_value(value: Any, depth: int = 0) -> str:
    """A JSON value as Rego, one entry a line with trailing commas, as `opa fmt` writes it."""
    inner = "\t" * (depth + 1)
    if isinstance(value, dict) and value:
        entries = "".join(
            f"{inner}{json.dumps(k)}: {rego_value(v, depth + 1)},\n" for k, v in value.items()
        )
        return "{\n" + entries + "\t" * depth + "}"
    if isinstance(value, list) and value:
        entries = "".join(f"{inner}{rego_value(v, depth + 1)},\n" for v in value)
        return "[\n" + entries + "\t" * depth + "]"
    return json.dumps(value)


def render() -> str:
    """The Rego fixture of the JSON one."""
    config = json.loads(JSON_FIXTURE.read_text(encoding="utf-8"))
    return f"{HEADER}config := {rego_value(config)}\n"


def write() -> None:
    REGO_FIXTURE.write_text(render(), encoding="utf-8")
