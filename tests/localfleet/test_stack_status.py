"""What the local stack's status says of the gate is what its webhook is declared to do."""

from __future__ import annotations

from components.policy_gate import webhook_namespace_selector
from fleet.config import load_stack_config
from fleet.project import stack_file
from localfleet.stackstatus import describe_namespace_selector


def test_the_gate_is_described_from_the_webhooks_namespace_selector() -> None:
    """The webhook judges every namespace but the platform's own, a team's or not."""
    fleet = load_stack_config(stack_file("local"))
    said = describe_namespace_selector(webhook_namespace_selector(fleet))
    assert said == "every namespace but " + ", ".join(fleet.system_namespaces())
    assert "fleetplane.dev/team" not in said


def test_other_selectors_are_described_too() -> None:
    assert describe_namespace_selector({}) == "every namespace"
    assert (
        describe_namespace_selector({"matchLabels": {"fleetplane.dev/team": "a"}})
        == "namespaces labelled fleetplane.dev/team=a"
    )
