"""The data document the gate's OPA loads at start with its policies (`data.fleetplane`): the
packages' anchors, the rendered configuration, the approvals, and the revision naming them.

`revision` names what OPA loaded (16 hex digits of a SHA-256 over the policies' text and the
rest of this document): a decision that says what gave it (the disruption answers, which the
controller keeps between passes and asks again when it changes: docs/disruption.md) carries it.
The policy gate's component (components/policy_gate.py) and the benchmarks' OPA
(bench/fleet_setup.py) build it here, so both load the same document."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet.digest import config_digest
from fleet.opa_anchors import package_anchors


def gate_data(
    policies: Mapping[str, str], config: dict[str, Any], approvals: dict[str, Any]
) -> dict[str, Any]:
    """`{"fleetplane": {...}}` for policies by path -> text, the rendered configuration
    (fleet/render.py render_opa_data) and the approvals (render_approvals)."""
    loaded: dict[str, Any] = {
        **package_anchors(policies.values()),  # writes cost OPA what they write
        "config": config,
        "approvals": approvals,
    }
    loaded["revision"] = config_digest([sorted(policies.items()), loaded])[:16]
    return {"fleetplane": loaded}
