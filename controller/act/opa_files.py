"""The documents the controller keeps for OPA to load at start, in a ConfigMap.

Each OPA replica keeps its data in memory: a replica that restarts (a rollout, an eviction, a
node lost) would judge every team as having spent nothing until the controller's next pass.
So the controller also writes what it publishes into the ConfigMap `controller.opa_data_configmap`,
one key per document (fleet/opa.py `CONTROLLER_DATA_FILES`), which the OPA Deployment mounts
as data files and the local fleet writes for its OPA. Written with a JSON merge patch of the
one key (the other keys stay), created on the first pass. Only this controller writes it, under
its Lease, so there is nothing to merge with. The documents that grow with the fleet
(reservations, workload records) are split over several ConfigMaps (`keep_shards`,
fleet/opa_shards.py): one would not hold them at 50,000 pods.
"""

from __future__ import annotations

from typing import Any

import orjson

from controller.errors import ConflictError, NotFoundError, PermanentError
from controller.observe.kube import KubeClient, label_selector, object_path
from fleet.opa import APPROVAL_BINDINGS_FILE_KEY
from fleet.opa_shards import DEPTHS, shard_configmap, shard_key, split

CONFIGMAP_LIMIT_BYTES = 900 * 1024
"""Stay well below the 1 MiB object size limit of etcd."""
MANAGED_BY = {"app.kubernetes.io/managed-by": "fleetplane-controller"}


def keep_for_opa(
    kube: KubeClient,
    configmap: str,
    key: str,
    document: Any,
    *,
    labels: dict[str, str] = MANAGED_BY,
) -> int:
    """Write `document` (JSON) under `key` of the ConfigMap "namespace/name" (created with
    `labels`); its size in bytes. PermanentError when it would not fit in a ConfigMap."""
    namespace, _, name = configmap.partition("/")
    if not namespace or not name:
        raise PermanentError(f"controller.opa_data_configmap {configmap!r}: not namespace/name")
    text = orjson.dumps(document, option=orjson.OPT_SORT_KEYS).decode()
    size = len(text.encode())
    if size > CONFIGMAP_LIMIT_BYTES:
        raise PermanentError(
            f"ConfigMap {configmap} key {key}: {size} bytes, above {CONFIGMAP_LIMIT_BYTES}"
        )
    path = object_path("v1", "configmaps", namespace, name)
    patch = {"data": {key: text}}
    try:
        kube.merge_patch(path, patch)
        return size
    except NotFoundError:
        pass
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": {key: text},
    }
    try:
        kube.create(object_path("v1", "configmaps", namespace, None), body)
    except ConflictError:  # created in between (a pass of another command): write the key
        kube.merge_patch(path, patch)
    return size


def kept_bindings(kube: KubeClient, configmap: str | None) -> dict[str, str]:
    """The approval bindings kept in the ConfigMap (approval id -> uid); none when there is
    no ConfigMap (configured or written yet). PermanentError when the key is not the document
    the controller writes."""
    if configmap is None:
        return {}
    namespace, _, name = configmap.partition("/")
    try:
        found = kube.get(object_path("v1", "configmaps", namespace, name))
    except NotFoundError:
        return {}
    text = ((found.get("data") or {}) if isinstance(found, dict) else {}).get(
        APPROVAL_BINDINGS_FILE_KEY
    )
    if text is None:
        return {}
    try:
        document = orjson.loads(text)
        return {str(k): str(v["uid"]) for k, v in document.items()}
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError) as error:
        raise PermanentError(
            f"ConfigMap {configmap} key {APPROVAL_BINDINGS_FILE_KEY}: not {{id: {{uid}}}}: {error}"
        ) from error


def keep_shards(
    kube: KubeClient, configmap: str, doc: str, document: dict[str, Any]
) -> tuple[int, int]:
    """Write `document` split into its parts (fleet/opa_shards.py), each part to its own
    ConfigMap beside `configmap`, only the parts whose text changed (the others are read and
    left); then drop the document's key from `configmap` itself, where a controller before the
    split kept it whole (OPA would merge the two and refuse to start on a conflict). Returns
    (bytes in all parts, parts written). PermanentError when a part would not fit."""
    namespace, _, name = configmap.partition("/")
    if not namespace or not name:
        raise PermanentError(f"controller.opa_data_configmap {configmap!r}: not namespace/name")
    size = written = 0
    # what the parts hold now: one list of the controller's ConfigMaps, not a read per part
    held = {
        item["metadata"]["name"]: item.get("data") or {}
        for item in kube.list(
            object_path("v1", "configmaps", namespace, None),
            params={"labelSelector": label_selector(MANAGED_BY)},
        )
    }
    for index, part in enumerate(split(document, DEPTHS[doc])):
        key = shard_key(doc, index)
        text = orjson.dumps(part, option=orjson.OPT_SORT_KEYS).decode()
        size += len(text.encode())
        target = f"{namespace}/{shard_configmap(name, doc, index)}"
        if held.get(shard_configmap(name, doc, index), {}).get(key) == text:
            continue
        keep_for_opa(kube, target, key, part)
        written += 1
    legacy = f"{doc}.json"
    try:
        found = kube.get(object_path("v1", "configmaps", namespace, name))
        if legacy in ((found.get("data") or {}) if isinstance(found, dict) else {}):
            kube.merge_patch(
                object_path("v1", "configmaps", namespace, name), {"data": {legacy: None}}
            )
    except NotFoundError:
        pass
    return size, written
