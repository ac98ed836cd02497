"""A node's place in a workflow: one label holds the state, one annotation the epoch second the
node entered it (timeouts survive a restart of the controller), one annotation compact JSON
with the workflow's details. Each mode names its own keys (`StateKeys`) and its own detail
fields (a frozen dataclass deriving from `NodeDetail`)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, Self

import orjson


@dataclass(frozen=True)
class StateKeys:
    """The label and annotations of one workflow."""

    label: str
    since: str
    detail: str


def read_since(annotations: dict[str, str], key: str) -> float | None:
    """The timer annotation as epoch seconds; None when absent or not a number."""
    text = annotations.get(key)
    try:
        return float(text) if text else None
    except ValueError:
        return None


class NodeDetail:
    """Encoding and decoding of a workflow's detail annotation, for frozen keyword-only
    dataclasses deriving from it. Unknown keys are dropped, a malformed document reads as the
    defaults, `attempt` must be a non-negative integer and `cordoned` is true only when it is
    `true`; `_checked` drops a mode's own malformed values. Values equal to one of `EMPTY` are
    not written."""

    EMPTY: ClassVar[tuple[Any, ...]] = (None, False)

    @classmethod
    def decode(cls, text: str | None) -> Self:
        if not text:
            return cls()
        try:
            raw = orjson.loads(text)
        except orjson.JSONDecodeError:
            return cls()
        if not isinstance(raw, dict):
            return cls()
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        values = {k: v for k, v in raw.items() if k in known}
        attempt = values.get("attempt")
        if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 0:
            values.pop("attempt", None)
        values = cls._checked(values)
        values["cordoned"] = values.get("cordoned") is True
        return cls(**values)

    @classmethod
    def _checked(cls, values: dict[str, Any]) -> dict[str, Any]:
        return values

    def encode(self) -> str:
        data = {
            f.name: getattr(self, f.name)
            for f in fields(self)  # type: ignore[arg-type]
            if getattr(self, f.name) not in self.EMPTY
        }
        return orjson.dumps(data).decode()

    def but(self, **changes: Any) -> Self:
        return replace(self, **changes)  # type: ignore[type-var]
