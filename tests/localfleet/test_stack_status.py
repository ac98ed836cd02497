"""What the local stack's status says of the gate is what its webhook is declared to do, and
of the placement the scheduler runs."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from components.policy_gate import webhook_namespace_selector
from fleet.config import load_stack_config
from fleet.project import stack_file
from localfleet.stacklayout import loopback
from localfleet.stackservices import StackServices
from localfleet.stackstatus import StackStatus, describe_namespace_selector


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


def placement_status(tmp_path: Path, placement: str, url: str | None) -> str:
    services = StackServices(layout=SimpleNamespace(services_dir=tmp_path))  # type: ignore[arg-type]
    status = StackStatus(layout=None, services=services, controller=None)  # type: ignore[arg-type]
    fleet = SimpleNamespace(volcano=SimpleNamespace(placement=placement, placement_url=url))
    return status.placement_status(fleet)


def test_the_status_says_which_placement_and_whether_its_service_runs(tmp_path: Path) -> None:
    assert placement_status(tmp_path, "volcano", None) == (
        "placement: volcano (Volcano's own scores)"
    )
    assert placement_status(tmp_path, "fgd", "http://127.0.0.1:18080") == (
        "placement: fgd, the placement service at http://127.0.0.1:18080 not running: "
        "Volcano's own scores meanwhile"
    )
    assert placement_status(tmp_path, "fgd", None) == (
        "placement: fgd, the placement service at in the cluster"
    )
    assert placement_status(tmp_path, "fgd", "http://placement.example:8080") == (
        "placement: fgd, the placement service at http://placement.example:8080"
    )


def test_the_local_stack_runs_the_placement_service_on_loopback() -> None:
    """Its placement defaults to fgd from its loopback URL, so `fleetplane up` starts the
    service (localfleet/stackservices.py) before Volcano."""
    volcano = load_stack_config(stack_file("local")).volcano
    assert volcano.placement == "fgd"
    assert volcano.placement_url is not None and loopback(volcano.placement_url)
