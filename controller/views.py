"""`view`: the dataclass of the objects a pass builds once per pod (tens of thousands of them).

They are read-only by contract, and mypy enforces it: `view` is declared as a dataclass
transform whose classes are frozen and keyword-only, so assigning a field is a type error. At
run time they are plain slotted dataclasses, because a frozen dataclass sets each field through
`object.__setattr__` in `__init__`, about five times slower than a plain one: at 50,000 pods,
the five per-pod classes of a pass (`Pod`, `GpuSeries`, `PodEvidence`, `PodJudgement`,
`PodCost`) cost about half a second more frozen. The spend plan's per-team `TeamSpend` and
`Accumulator` are views too: few per pass, but the replay builds them every period of every
scenario (about 3 us a team frozen, over 40,000 periods).

What is lost at run time is the FrozenInstanceError on assignment and the hash of a frozen
class; none of these is hashable anyway (each holds a dict or one that does), except
`GpuSeries`, which nothing hashes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, dataclass_transform

T = TypeVar("T")


@dataclass_transform(frozen_default=True, kw_only_default=True)
def view(cls: type[T]) -> type[T]:
    """`@dataclass(frozen=True, slots=True, kw_only=True)` for the type checker; the same
    without `frozen` at run time (see the module doc)."""
    return dataclass(slots=True, kw_only=True)(cls)
