"""Annotation keys the controller alone writes and reads, beside the shared ones in
`fleet.labels` (`IDLE_WARNED_AT`, `RECLAIM_DEADLINE`, `LAST_CHECKPOINT`, ...). No policy
reads these; they record what the controller did and why, for people and for later passes."""

from __future__ import annotations

from typing import Final

# On a reclaimed Deployment / StatefulSet / ReplicaSet / Job / Volcano Job.
RECLAIMED_AT: Final = "fleetplane.dev/reclaimed-at"
RECLAIMED_REPLICAS: Final = "fleetplane.dev/reclaimed-replicas"  # replicas before scaling to 0
RECLAIM_REASON: Final = "fleetplane.dev/reclaim-reason"

# On a preempted pod (victim) and on the pod it made room for (preemptor).
PREEMPTED_BY: Final = "fleetplane.dev/preempted-by"
PREEMPTED_AT: Final = "fleetplane.dev/preempted-at"
PREEMPTION_REASON: Final = "fleetplane.dev/preemption-reason"
PREEMPTION_VICTIMS: Final = "fleetplane.dev/preemption-victims"

# On a team's first namespace: the month-to-date spend accumulator (see decide.spend).
SPEND: Final = "fleetplane.dev/spend"
