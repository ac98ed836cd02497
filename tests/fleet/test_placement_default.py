"""`volcano.placement`'s default: fgd when the placement service is at hand (its image,
`volcano.placement_image` or else `controller.image`, which carries it; or a `placement_url`),
volcano otherwise; written explicitly, either keeps its meaning. And the
`volcano-scheduler.conf` a default fleet renders from it."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from fleet.config import FleetConfig, VolcanoConfig, check_fleet, load_stack_config, parse_fleet
from fleet.placement import service_url
from fleet.volcano import scheduler_config
from tests.components.component_testkit import REPO_ROOT, minimal_raw_fleet

PLACEMENT_IMAGE = "registry.example/fleetplane/placement@sha256:" + "b" * 64
URL = "http://127.0.0.1:18080"


def without_images(raw: dict[str, Any]) -> dict[str, Any]:
    """The minimal fleet with no controller image (its CronJob suspended, which then needs
    none) and no placement image or URL."""
    raw["controller"] = {"suspend": True}
    return raw


def placement_of(raw: dict[str, Any]) -> str:
    fleet = parse_fleet(raw)
    return fleet.volcano.placement


def test_no_image_and_no_url_is_volcano() -> None:
    raw = without_images(minimal_raw_fleet())
    assert placement_of(raw) == "volcano"


def test_the_controllers_image_makes_it_fgd() -> None:
    raw = minimal_raw_fleet()
    assert raw["controller"]["image"]
    assert placement_of(raw) == "fgd"


def test_a_placement_image_makes_it_fgd() -> None:
    raw = without_images(minimal_raw_fleet())
    raw["volcano"] = {"placement_image": PLACEMENT_IMAGE}
    assert placement_of(raw) == "fgd"


def test_a_placement_url_makes_it_fgd() -> None:
    raw = without_images(minimal_raw_fleet())
    raw["volcano"] = {"placement_url": URL}
    assert placement_of(raw) == "fgd"


@pytest.mark.parametrize(
    "volcano",
    [{}, {"placement_image": PLACEMENT_IMAGE}, {"placement_url": URL}],
    ids=["controller-image", "placement-image", "placement-url"],
)
def test_volcano_written_with_a_service_at_hand_stays_volcano(volcano: dict[str, Any]) -> None:
    raw = minimal_raw_fleet()
    raw["volcano"] = {**volcano, "placement": "volcano"}
    fleet = parse_fleet(raw)
    assert fleet.volcano.placement == "volcano"
    assert "extender" not in scheduler_config(fleet)


def test_fgd_written_without_a_service_stays_refused() -> None:
    raw = without_images(minimal_raw_fleet())
    raw["volcano"] = {"placement": "fgd"}
    fleet = FleetConfig.model_validate(raw)
    assert fleet.volcano.placement == "fgd"
    problems = check_fleet(fleet)
    assert [p.path for p in problems] == ["volcano.placement_image"]
    assert "needs the service's image by digest" in problems[0].reason


def test_the_resolved_default_survives_a_dump_and_a_reload() -> None:
    """The `volcano` fixture and `fleetplane render` dump a fleet and parse it again: the
    placement is then written, and the same."""
    fleet = parse_fleet(minimal_raw_fleet())
    again = parse_fleet(fleet.model_dump(mode="json", exclude_none=True))
    assert again.volcano.placement == fleet.volcano.placement == "fgd"


def test_a_volcano_section_given_as_a_model_resolves_the_same() -> None:
    raw = minimal_raw_fleet()
    raw["volcano"] = VolcanoConfig()
    assert FleetConfig.model_validate(raw).volcano.placement == "fgd"
    raw["volcano"] = VolcanoConfig(placement="volcano")
    assert FleetConfig.model_validate(raw).volcano.placement == "volcano"


def test_a_default_fleet_with_an_image_renders_the_ignorable_extender() -> None:
    """The rendered `volcano-scheduler.conf` of a fleet that writes nothing about placement
    but has the controller's image: the extender last in the last tier, calling the
    in-cluster Service, ignorable (a service down leaves Volcano's own scores)."""
    fleet = parse_fleet(minimal_raw_fleet())
    conf = yaml.safe_load(scheduler_config(fleet))
    last = conf["tiers"][-1]["plugins"][-1]
    assert last["name"] == "extender"
    assert last["arguments"]["extender.ignorable"] is True
    assert last["arguments"]["extender.urlPrefix"] == service_url(fleet.volcano.namespace)
    plugins = [p["name"] for tier in conf["tiers"] for p in tier["plugins"]]
    assert plugins.count("extender") == 1


def test_a_default_fleet_without_an_image_renders_volcanos_own_scores() -> None:
    fleet = parse_fleet(without_images(minimal_raw_fleet()))
    assert "extender" not in scheduler_config(fleet)


@pytest.mark.parametrize("stack", ["dev", "prod", "local"])
def test_the_shipped_stacks_write_no_placement_and_get_fgd(stack: str) -> None:
    """dev and prod have the controller's image; the local stack runs the service on loopback
    (`volcano.placement_url`, started by `fleetplane up`)."""
    path = REPO_ROOT / "stacks" / f"Pulumi.{stack}.yaml"
    written = yaml.safe_load(path.read_text())["config"]["fleetplane:fleet"].get("volcano") or {}
    assert "placement" not in written
    assert load_stack_config(path).volcano.placement == "fgd"
