"""Where the controller keeps its disruption answers between passes: the names the controller
writes (controller/act/disruption_memo.py) and its Role grants (components/controller_job.py).

`PARTS` ConfigMaps `<controller.opa_data_configmap>-disruption-<i>`, each one key `KEY`,
labelled `LABEL` (not the label of the documents OPA loads: OPA never mounts them)."""

from __future__ import annotations

from typing import Final

PARTS: Final = 16
KEY: Final = "answers.json"
LABEL: Final = {"fleetplane.dev/kept": "disruption-answers"}


def part_names(configmap_name: str) -> list[str]:
    """The parts' ConfigMap names beside the kept documents' ConfigMap."""
    return [f"{configmap_name}-disruption-{i}" for i in range(PARTS)]


def part_of(digest: str) -> int:
    """The part of an answer, by the first hex digit of its digest."""
    return int(digest[0], 16) % PARTS
