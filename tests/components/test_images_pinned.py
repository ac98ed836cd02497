"""Every image the product declares is named by digest: each container and init container of
every object the components render for the example stacks, the remedy and validator pods the
controller creates from the configuration, and the image fields of the Helm values the
components write. A tag can be moved to other contents; a digest cannot."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.gpu_operator import gpu_operator_values
from components.platform import render_manifests
from components.volcano import volcano_values
from fleet.config import load_stack_config
from fleet.config.schema import FleetConfig

REPO_ROOT = Path(__file__).resolve().parents[2]
BY_DIGEST = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")
STACKS = ("dev", "prod")


def images(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every `image` key (a container's) and every Helm-style image block (`repository` with
    `tag`, `version` or `digest`) in a document."""
    if isinstance(value, dict):
        if "image" in value and isinstance(value["image"], str | None):
            yield f"{path}.image", value["image"]
        if "repository" in value and ({"tag", "digest"} & set(value)):
            yield f"{path}.repository", f"{value['repository']}@{value.get('digest', '')}"
        for key, item in value.items():
            yield from images(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from images(item, f"{path}[{index}]")


def fleet(stack: str) -> FleetConfig:
    return load_stack_config(REPO_ROOT / "stacks" / f"Pulumi.{stack}.yaml")


@pytest.mark.parametrize("stack", STACKS)
def test_every_container_the_components_declare_is_by_digest(stack: str) -> None:
    found = {
        f"{m['kind']}/{m['metadata']['name']}{where}": image
        for m in render_manifests(fleet(stack))
        for where, image in images(m.get("spec"))
    }
    assert any("pushgateway" in key for key in found), "the Pushgateway is declared"
    assert any("Deployment" in key for key in found)
    by_tag = {key: image for key, image in found.items() if not BY_DIGEST.match(str(image))}
    assert by_tag == {}


@pytest.mark.parametrize("stack", STACKS)
def test_the_charts_values_name_no_image_by_tag(stack: str) -> None:
    """The GPU Operator's and Volcano's images come from their pinned chart versions; the
    values written here override none of them by tag."""
    config = fleet(stack)
    values = [volcano_values(config)]
    values += [gpu_operator_values(config, cluster) for cluster in config.clusters]
    by_tag = [
        (where, image)
        for document in values
        for where, image in images(document)
        if not BY_DIGEST.match(str(image))
    ]
    assert by_tag == []


def test_a_pushgateway_image_by_tag_is_refused(fleet_from: Any) -> None:
    from fleet.config.errors import ConfigError

    def by_tag(raw: dict[str, Any]) -> None:
        raw.setdefault("observability", {}).setdefault("pushgateway", {})["image"] = (
            "quay.io/prometheus/pushgateway:v1.5.1"
        )

    with pytest.raises(ConfigError) as error:
        fleet_from(by_tag)
    assert "observability.pushgateway.image" in str(error.value)
    assert "by digest" in str(error.value)


def test_a_deployed_pushgateway_needs_its_image(fleet_from: Any) -> None:
    from fleet.config.errors import ConfigError

    def unnamed(raw: dict[str, Any]) -> None:
        raw.setdefault("observability", {}).setdefault("pushgateway", {}).update(
            deploy=True, image=None
        )

    with pytest.raises(ConfigError) as error:
        fleet_from(unnamed)
    assert "observability.pushgateway.image: required with deploy: true" in str(error.value)
