"""The fleet-sized documents the controller keeps for OPA's next start, split over ConfigMaps.

A ConfigMap holds at most 1 MiB (etcd's object limit; the controller stays under 900 KiB). The
reservations of a 50,000-pod fleet of bare pods were 3.5 MB, so keeping them in one key failed
for good (issue 31), and a replica that restarted judged every team as having reserved nothing.
So the documents that grow with the fleet (reservations, workload records) are split by a hash
of each entry's key into `SHARDS` parts, part i in its own ConfigMap `<configmap>-<doc>-<i>`
under the key `<doc>-<i>.json`. OPA loads each part as a file under the document's path
(`fleetplane/reservations/shard-<i>.json`) and merges them: files under one directory are one
document, their objects merged (tests/controller/test_opa_restart_scale.py restarts OPA on a
100,000-pod fleet's parts and gets the same decisions).

16 parts of 900 KiB hold 14 MiB: about 200,000 reservations of bare pods at ~70 bytes each.
The OPA Deployment mounts every part (optional: absent until written) in one projected volume
with the small documents' ConfigMap (`controller_data_sources`).

Measured against the alternatives: a bundle the controller serves would need a server (the
controller is a CronJob; the keeper a single Deployment whose restart would then stop OPA's
starts), and a custom resource per team is the same 1 MiB limit per object.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

SHARDS = 16
SHARDED = {"reservations": "fleetplane/reservations", "workloads": "fleetplane/workloads"}
"""Document name -> its path under the directory OPA loads (fleet/opa.py CONTROLLER_DATA_FILES
holds the small documents)."""


def shard_configmap(configmap_name: str, doc: str, index: int) -> str:
    return f"{configmap_name}-{doc}-{index}"


def shard_key(doc: str, index: int) -> str:
    return f"{doc}-{index}.json"


def shard_path(doc: str, index: int) -> str:
    return f"{SHARDED[doc]}/shard-{index}.json"


def shard_of(key: str, shards: int = SHARDS) -> int:
    return zlib.crc32(key.encode()) % shards


def split(document: dict[str, Any], depth: int, shards: int = SHARDS) -> list[dict[str, Any]]:
    """`document` as `shards` parts: each member at `depth` levels (a workload record under
    namespace -> key: 2; a reservation under team -> section -> uid: 3) in the part of its
    key's hash, with the objects above it; an empty object above that depth in part 0
    (merged, the parts are the document)."""
    parts: list[dict[str, Any]] = [{} for _ in range(shards)]

    def place(node: dict[str, Any], at: tuple[str, ...], level: int) -> None:
        if not node:
            _at(parts[0], at)
        for key, value in node.items():
            if level == depth or not isinstance(value, dict):
                _at(parts[shard_of(key, shards)], at)[key] = value
            else:
                place(value, (*at, key), level + 1)

    place(document, (), 1)
    return parts


def _at(root: dict[str, Any], at: tuple[str, ...]) -> dict[str, Any]:
    for key in at:
        root = root.setdefault(key, {})
    return root


DEPTHS = {"reservations": 3, "workloads": 2}
"""The depth at which each sharded document's entries are split (and compared for a PATCH)."""


def controller_data_sources(
    configmap_name: str, small_files: dict[str, str]
) -> list[dict[str, Any]]:
    """The sources of the projected volume OPA loads the controller's documents from: the
    small documents' ConfigMap (key -> path `small_files`) and every part of each sharded
    document, all optional (absent until the controller's first pass writes them)."""
    sources: list[dict[str, Any]] = [
        {
            "configMap": {
                "name": configmap_name,
                "optional": True,
                "items": [{"key": k, "path": p} for k, p in small_files.items()],
            }
        }
    ]
    for doc in SHARDED:
        for index in range(SHARDS):
            sources.append(
                {
                    "configMap": {
                        "name": shard_configmap(configmap_name, doc, index),
                        "optional": True,
                        "items": [{"key": shard_key(doc, index), "path": shard_path(doc, index)}],
                    }
                }
            )
    return sources


def shard_files(
    configmap_name: str, read: Callable[[str], dict[str, str] | None]
) -> dict[str, str]:
    """The files OPA loads from the parts (path -> text), as the Deployment's projected volume
    gives them: `read(name)` is the `data` of the ConfigMap of that name, None when absent."""
    files: dict[str, str] = {}
    for doc in SHARDED:
        for index in range(SHARDS):
            data = read(shard_configmap(configmap_name, doc, index)) or {}
            text = data.get(shard_key(doc, index))
            if text is not None:
                files[shard_path(doc, index)] = text
    return files
