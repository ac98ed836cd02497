"""How the fleet around the replayed controller behaves: the replay's settings and their
documented defaults. Kept apart from the engine so the command line can show the defaults
without loading it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp()
"""Trace time 0 as epoch seconds: the month boundaries budgets reset on."""


@dataclass(frozen=True, kw_only=True)
class Settings:
    """How the fleet around the controller behaves; defaults are the documented assumptions.

    epoch: trace time 0 in epoch seconds. provision_seconds: from asking for a node to the node
    taking pods. scale_down_seconds: an empty node is removed after this long.
    spot_interruptions_per_node_month: rate of spot interruptions (exponential, per node, a
    month being 30 days). seed: of the interruption draws. interruptions: (pool, trace time)
    pairs that interrupt the oldest ready node of the pool then, in addition (tests).
    window: (start, end) trace times the figures cover; None for the whole replay.
    horizon: when the replay stops; None for the trace's last deletion.
    """

    epoch: float = EPOCH
    provision_seconds: float = 300.0
    scale_down_seconds: float = 600.0
    spot_interruptions_per_node_month: float = 0.2
    seed: int = 20230701
    interruptions: tuple[tuple[str, float], ...] = ()
    window: tuple[float, float] | None = None
    horizon: float | None = None
