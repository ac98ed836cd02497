"""`volcano.placement: fgd` in the configuration and the Volcano component: the scheduler's
tiers gain the extender (and nothing else changes), the service is declared with its image by
digest, and a wrong setting is refused."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from components.volcano import Volcano, VolcanoArgs
from fleet.config import FleetConfig, check_fleet, load_stack_config
from fleet.placement import ENTRYPOINT, PORT, SCORE_SCALE, service_url
from tests.components.component_testkit import REPO_ROOT, run_program

RELEASE = "kubernetes:helm.sh/v3:Release"
IMAGE = "registry.example/fleetplane/placement@sha256:" + "a" * 64


@pytest.fixture(scope="module")
def prod() -> FleetConfig:
    return load_stack_config(REPO_ROOT / "stacks" / "Pulumi.prod.yaml")


def with_volcano(fleet: FleetConfig, **update: Any) -> FleetConfig:
    return fleet.model_copy(update={"volcano": fleet.volcano.model_copy(update=update)})


def declared(fleet: FleetConfig) -> Any:
    return run_program(
        lambda: Volcano("prod-volcano", VolcanoArgs(fleet=fleet, cluster=fleet.clusters[0]))
    )


def tiers(result: Any) -> list[dict[str, Any]]:
    release = result.one(RELEASE).inputs
    return list(yaml.safe_load(release["values"]["custom"]["scheduler_config_override"])["tiers"])


def test_placement_volcano_written_is_volcanos_own_scores(prod: FleetConfig) -> None:
    fleet = with_volcano(prod, placement="volcano")
    result = declared(fleet)
    names = [p["name"] for t in tiers(result) for p in t["plugins"]]
    assert "extender" not in names
    assert not [r for r in result.registrations if "placement" in r.name]


def test_the_default_with_the_controllers_image_is_fgd_declared(prod: FleetConfig) -> None:
    """prod writes no placement and has the controller's image: the scheduler calls the
    service, ignorable, and the component declares it (Deployment of that image, Service)."""
    assert prod.controller.image is not None and prod.volcano.placement_url is None
    assert prod.volcano.placement == "fgd"
    result = declared(prod)
    conf = tiers(result)
    extender = conf[-1]["plugins"][-1]
    assert extender["name"] == "extender"
    assert extender["arguments"]["extender.ignorable"] is True
    assert extender["arguments"]["extender.urlPrefix"] == service_url(prod.volcano.namespace)
    kinds = {r.typ.rsplit(":", 1)[-1]: r for r in result.registrations if "placement" in r.name}
    assert {"ServiceAccount", "Deployment", "Service", "PodDisruptionBudget"} <= set(kinds)
    (container,) = kinds["Deployment"].inputs["spec"]["template"]["spec"]["containers"]
    assert container["image"] == prod.controller.image
    assert kinds["Service"].inputs["spec"]["ports"][0]["port"] == PORT


def test_the_default_without_any_image_declares_nothing(prod: FleetConfig) -> None:
    document = prod.model_dump(mode="json", exclude_none=True)
    document["volcano"].pop("placement")
    document["controller"].pop("image")
    document["controller"]["suspend"] = True
    fleet = FleetConfig.model_validate(document)
    assert fleet.volcano.placement == "volcano"
    result = declared(fleet)
    assert "extender" not in [p["name"] for t in tiers(result) for p in t["plugins"]]
    assert not [r for r in result.registrations if "placement" in r.name]


def test_fgd_adds_the_ignorable_extender_and_declares_the_service(prod: FleetConfig) -> None:
    shipped = tiers(declared(with_volcano(prod, placement="volcano")))
    fleet = with_volcano(prod, placement="fgd", placement_image=IMAGE)
    result = declared(fleet)
    conf = tiers(result)
    before = [p for t in shipped for p in t["plugins"]]
    added = [p for t in conf for p in t["plugins"] if p not in before]
    namespace = fleet.volcano.namespace
    assert added == [
        {
            "name": "extender",
            "arguments": {
                "extender.urlPrefix": f"http://fleetplane-placement.{namespace}.svc:{PORT}",
                "extender.httpTimeout": "500ms",
                "extender.prioritizeVerb": "prioritize",
                "extender.ignorable": True,
            },
        }
    ]
    assert conf[-1]["plugins"][-1]["name"] == "extender"
    assert service_url(namespace).endswith(f":{PORT}")
    kinds = {r.typ.rsplit(":", 1)[-1]: r for r in result.registrations if "placement" in r.name}
    assert {"ServiceAccount", "Deployment", "Service", "PodDisruptionBudget"} <= set(kinds)
    pod = kinds["Deployment"].inputs["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == IMAGE
    assert pod["automountServiceAccountToken"] is False
    assert kinds["Service"].inputs["spec"]["ports"][0]["port"] == PORT


def test_a_service_elsewhere_is_called_and_not_declared(prod: FleetConfig) -> None:
    fleet = with_volcano(prod, placement="fgd", placement_url="http://127.0.0.1:18080")
    result = declared(fleet)
    extender = tiers(result)[-1]["plugins"][-1]
    assert extender["arguments"]["extender.urlPrefix"] == "http://127.0.0.1:18080"
    assert not [r for r in result.registrations if "placement" in r.name]


def test_fgd_runs_the_controllers_image_unless_told_otherwise(prod: FleetConfig) -> None:
    """`fleetplane image build` builds the service into the controller's image: with no
    placement_image, the Deployment runs that image's `fleetplane-placement`."""
    assert prod.controller.image is not None
    result = declared(with_volcano(prod, placement="fgd"))
    deployment = next(
        r for r in result.registrations if "placement" in r.name and r.typ.endswith(":Deployment")
    )
    (container,) = deployment.inputs["spec"]["template"]["spec"]["containers"]
    assert container["image"] == prod.controller.image
    assert container["command"] == [ENTRYPOINT, f"--port={PORT}"]


def test_fgd_without_an_image_or_a_url_is_refused(prod: FleetConfig) -> None:
    document = prod.model_dump(mode="json")
    document["volcano"]["placement"] = "fgd"
    assert check_fleet(FleetConfig.model_validate(document)) == []  # the controller's image
    document["controller"]["image"] = None
    document["controller"]["suspend"] = True
    problems = check_fleet(FleetConfig.model_validate(document))
    assert [p.path for p in problems] == ["volcano.placement_image"]
    document["volcano"]["placement_image"] = "registry.example/placement:latest"
    with pytest.raises(ValidationError, match="by digest"):
        FleetConfig.model_validate(document)
    document["volcano"]["placement"] = "best-fit"
    with pytest.raises(ValidationError, match="placement"):
        FleetConfig.model_validate(document)


def test_fgd_outweighs_everything_the_shipped_plugins_add() -> None:
    """binpack adds at most 100 x its weight (10), nodeorder at most 100 per plugin weight
    (leastrequested 1, balancedresource 1, tainttoleration 3, ...): one FGD point is more."""
    assert SCORE_SCALE > 100 * 10 + 100 * 10
