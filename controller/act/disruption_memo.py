"""Where the disruption answers a pass keeps for the next are held (decide.disruption_memo):
ConfigMaps beside the documents the controller keeps for OPA.

The controller is a CronJob, a new process each pass, so what it keeps must live in the
cluster. The kept answers are a digest (16 hex) and an instant per running accelerator pod,
about 32 bytes: 2.6 MB at 80,000 pods, split by the digest's first hex digit over `PARTS`
ConfigMaps (fleet/disruption_kept.py; key `answers.json`: `{"revision": ..., "answers":
{digest: recheck_at}}`), each written only when its text changed. They carry their own label,
not the label of the documents OPA loads, so OPA never mounts them and the documents' list
never reads them.

A cache: with no `controller.opa_data_configmap`, under --dry-run (nothing written), or when
the parts cannot be read or written, the pass asks about every pod as before; such an error is
logged as a warning, and it fails nothing.
"""

from __future__ import annotations

from typing import Any

import orjson

from controller.act.opa_files import keep_for_opa
from controller.act.runtime import Runtime
from controller.decide.disruption_memo import Kept
from controller.errors import ControllerError
from controller.observe.kube import label_selector, object_path
from fleet.disruption_kept import KEY, LABEL, PARTS, part_names, part_of


def _where(rt: Runtime) -> tuple[str, str] | None:
    configmap = rt.settings.opa_data_configmap
    if not configmap:
        return None
    namespace, _, name = configmap.partition("/")
    return (namespace, name) if namespace and name else None


def _held(rt: Runtime, namespace: str) -> dict[str, str]:
    """Each part's text by ConfigMap name: one list of the labelled ConfigMaps."""
    return {
        item["metadata"]["name"]: (item.get("data") or {}).get(KEY, "")
        for item in rt.kube.list(
            object_path("v1", "configmaps", namespace, None),
            params={"labelSelector": label_selector(LABEL)},
        )
    }


def read_kept(rt: Runtime) -> tuple[Kept, dict[str, str]]:
    """The answers the last pass kept, under the revision of the first part found, and each
    part's text (for `write_kept`); none when there are none or they cannot be read. A part
    under another revision (a pass that stopped half way through writing them) is ignored:
    its pods are asked again."""
    where = _where(rt)
    if where is None:
        return Kept(), {}
    namespace, name = where
    try:
        held = _held(rt, namespace)
    except ControllerError as error:
        rt.log.warning("disruption.kept.unreadable", error=str(error), consequence="ask all")
        return Kept(), {}
    revision: str | None = None
    answers: dict[str, int] = {}
    for part in part_names(name):
        text = held.get(part)
        if not text:
            continue
        try:
            document = orjson.loads(text)
            found, entries = document["revision"], document["answers"]
            if revision is None:
                revision = found
            if found != revision or not isinstance(entries, dict):
                continue
            answers.update({str(k): int(v) for k, v in entries.items()})
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as error:
            rt.log.warning(
                "disruption.kept.malformed", configmap=part, error=str(error), consequence="ask"
            )
    return Kept(revision=revision if isinstance(revision, str) else None, answers=answers), held


def write_kept(rt: Runtime, kept: Kept, held: dict[str, str]) -> int:
    """Write the parts whose text differs from `held` (what `read_kept` read); how many were
    written. Nothing under --dry-run or without a revision to keep them under."""
    where = _where(rt)
    if where is None or rt.dry_run or kept.revision is None:
        return 0
    namespace, name = where
    parts: list[dict[str, int]] = [{} for _ in range(PARTS)]
    for digest, recheck in kept.answers.items():
        parts[part_of(digest)][digest] = recheck
    written = 0
    try:
        for part, entries in zip(part_names(name), parts, strict=True):
            document: dict[str, Any] = {"revision": kept.revision, "answers": entries}
            if held.get(part) == orjson.dumps(document, option=orjson.OPT_SORT_KEYS).decode():
                continue
            keep_for_opa(rt.kube, f"{namespace}/{part}", KEY, document, labels=LABEL)
            written += 1
    except ControllerError as error:
        rt.log.warning(
            "disruption.kept.unwritten", error=str(error), consequence="the next pass asks more"
        )
    return written
