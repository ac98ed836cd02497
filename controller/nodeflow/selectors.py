"""Equality-based label selectors in their text form (`app=x,tier!=y,key,!other`), as the API
server's `labelSelector` parameter takes them; used to recognise the GPU Operator's driver pods
among the pods listed on a node."""

from __future__ import annotations

import re
from dataclasses import dataclass

_KEY = re.compile(
    r"^([a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?/)?[a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?$"
)
_VALUE = re.compile(r"^([a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?)?$")


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # "=", "!=", "exists", "!exists"
    value: str = ""


@dataclass(frozen=True)
class Selector:
    text: str
    requirements: tuple[Requirement, ...]

    def matches(self, labels: dict[str, str]) -> bool:
        for req in self.requirements:
            present = req.key in labels
            if req.operator == "=" and labels.get(req.key) != req.value:
                return False
            if req.operator == "!=" and present and labels[req.key] == req.value:
                return False
            if req.operator == "exists" and not present:
                return False
            if req.operator == "!exists" and present:
                return False
        return True

    def __str__(self) -> str:
        return self.text


def parse_selector(text: object) -> Selector:
    """Raises ValueError naming what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("must be a non-empty label selector like app=nvidia-driver-daemonset")
    requirements = []
    for part in (p.strip() for p in text.split(",")):
        if "!=" in part:
            key, value = (s.strip() for s in part.split("!=", 1))
            operator = "!="
        elif "=" in part:
            key, value = (s.strip() for s in part.replace("==", "=").split("=", 1))
            operator = "="
        elif part.startswith("!"):
            key, value, operator = part[1:].strip(), "", "!exists"
        else:
            key, value, operator = part, "", "exists"
        if not _KEY.match(key) or not _VALUE.match(value):
            raise ValueError(f"{part!r} is not an equality-based requirement (k=v, k!=v, k or !k)")
        requirements.append(Requirement(key, operator, value))
    return Selector(
        text=",".join(_render(r) for r in requirements), requirements=tuple(requirements)
    )


def _render(req: Requirement) -> str:
    if req.operator == "exists":
        return req.key
    if req.operator == "!exists":
        return f"!{req.key}"
    return f"{req.key}{req.operator}{req.value}"
