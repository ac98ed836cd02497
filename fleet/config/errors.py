"""Configuration problems: each one a path and a reason, all of them raised together."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One configuration problem: where (`path`) and what is wrong (`reason`)."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class ConfigError(ValueError):
    """The configuration is invalid; `problems` lists every problem found."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(
            f"invalid fleet configuration ({len(self.problems)} problem"
            f"{'' if len(self.problems) == 1 else 's'}):\n{lines}"
        )
