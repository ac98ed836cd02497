"""Optimistic writes: patch with the resourceVersion that was read; on a 409 conflict re-read,
decide again whether the change is still wanted, and retry once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controller.errors import ConflictError
from controller.observe.kube import KubeClient


def patch_fresh(
    kube: KubeClient,
    path: str,
    resource_version: str | None,
    build: Callable[[dict[str, Any] | None], dict[str, Any] | None],
) -> dict[str, Any] | None:
    """Merge-patch `path` with `build(current)`, where `current` is None on the first try (the
    caller's snapshot is assumed) and the freshly read object after a conflict. `build` returns
    None when the change is no longer wanted. The patch carries `metadata.resourceVersion`, so
    the server refuses it if the object changed since it was read. Returns the patched object,
    or None when nothing was written."""
    patch = build(None)
    if patch is None:
        return None
    if resource_version:
        patch = {
            **patch,
            "metadata": {**patch.get("metadata", {}), "resourceVersion": resource_version},
        }
    try:
        return kube.merge_patch(path, patch)
    except ConflictError:
        current = kube.get(path)
        patch = build(current)
        if patch is None:
            return None
        version = (current.get("metadata") or {}).get("resourceVersion")
        patch = {**patch, "metadata": {**patch.get("metadata", {}), "resourceVersion": version}}
        return kube.merge_patch(path, patch)
