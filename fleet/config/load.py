"""Loading: a stack file read without Pulumi (duplicate keys refused), its fleet validated in
both passes, every problem named by its path in the document."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from fleet.config.checks import check_fleet
from fleet.config.errors import ConfigError, Problem
from fleet.config.schema import FleetConfig

STACK_CONFIG_KEY = "fleetplane:fleet"
"""The stack configuration key that holds the fleet."""

KUBECONFIG_CONFIG_KEY = "fleetplane:kubeconfig"
"""The stack configuration key naming the kubeconfig of the `local` stack."""


def parse_fleet(raw: Any) -> FleetConfig:
    """A validated `FleetConfig` from plain data, or `ConfigError` listing every problem."""
    try:
        config = FleetConfig.model_validate(raw)
    except ValidationError as error:
        raise ConfigError(
            [
                Problem(
                    path=_format_loc(e["loc"], raw), reason=e["msg"].removeprefix("Value error, ")
                )
                for e in error.errors(include_url=False)
            ]
        ) from None
    problems = check_fleet(config)
    if problems:
        raise ConfigError(problems)
    return config


def _format_loc(loc: Iterable[int | str], raw: Any) -> str:
    """`clusters[local].pools[h100-spot].max_nodes` from a pydantic location and the raw data."""
    path = ""
    node = raw
    for part in loc:
        if isinstance(part, int):
            item = node[part] if isinstance(node, list) and part < len(node) else None
            name = item.get("name") if isinstance(item, dict) else None
            path += f"[{name}]" if isinstance(name, str) and name else f"[{part}]"
            node = item
        else:
            # pydantic's own segments (union members, validator names) are not keys of the data
            if not isinstance(node, dict) or (part not in node and "[" in part):
                continue
            segment = f"[{part}]" if re.search(r"[./]", part) else part
            path += segment if not path or segment.startswith("[") else f".{segment}"
            node = node.get(part) if isinstance(node, dict) else None
    return path or "<root>"


class _StrictLoader(yaml.SafeLoader):
    """A YAML loader that refuses duplicate mapping keys instead of keeping the last one."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise ConfigError(
                [
                    Problem(
                        path=f"line {key_node.start_mark.line + 1}",
                        reason=f"duplicate key {key!r}",
                    )
                ]
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_stack_file(path: Path) -> dict[str, Any]:
    """The `config` mapping of a `Pulumi.<stack>.yaml` file (duplicate keys are an error)."""
    document = yaml.load(path.read_text(encoding="utf-8"), Loader=_StrictLoader)
    config = (document or {}).get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError([Problem(path=str(path), reason="`config` is not a mapping")])
    return config


def load_stack_config(path: Path) -> FleetConfig:
    """The fleet of a `stacks/Pulumi.<stack>.yaml` file, read without Pulumi."""
    config = read_stack_file(path)
    if STACK_CONFIG_KEY not in config:
        raise ConfigError([Problem(path=str(path), reason=f"no {STACK_CONFIG_KEY!r} key")])
    return parse_fleet(config[STACK_CONFIG_KEY])
