"""Gang stragglers: one member of a gang near-idle while its peers are busy, over a whole window.

A gang is the pods of one Volcano PodGroup (`decide.workloads.gang_of`). A running member is a
straggler when, over `straggler_window_seconds`, the peak GPU utilisation of its GPUs is at or
under `straggler_util_percent` while the mean utilisation of every other non-terminal member
(its peers) is at or above `busy_util_percent`. A straggler holds the whole gang back: the
others wait for it at every collective.

Evidence (`Utilisation`, one per pod) is complete when it has at least the samples a window
holds (`expected_samples`, as idle reclamation counts them). Missing or partial evidence for the
pod or for any peer, or a peer not running (a series under a pending pod's name is an earlier
pod's), makes the pod UNKNOWN: never a straggler,
never acted on.

Per running gang member, the first that applies:

1. its evidence missing or partial                   → UNKNOWN
2. its peak above the straggler line                 → ACTIVE
3. a peer not running, or its evidence missing or partial → UNKNOWN
4. a peer's mean under the busy line                 → PEERS_NOT_BUSY
5. not reported within the window                    → STRAGGLER (report it: Event + annotation)
6. reported within the window                        → REPORTED (reported once per window; a pod
                                                       opted in with `fleetplane.dev/straggler-
                                                       action=restart` is restarted, OPA's
                                                       `straggler-restart` having the last word)

The report is state on the pod (`fleetplane.dev/straggler-reported-at`), so a straggler is
reported once per window and acted on only after it was reported. A restart deletes the pod so
that its controller creates it again; a bare pod would not come back, so it is only reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from controller.config import LifetimeRules
from controller.decide.workloads import GANG_ANNOTATION, annotation_number, gang_of, verdict_counts
from controller.observe.model import Pod
from fleet import labels as keys

RESTART = "restart"
"""The value of `fleetplane.dev/straggler-action` that opts a pod in to being restarted."""


class Verdict(StrEnum):
    UNKNOWN = "unknown"
    ACTIVE = "active"
    PEERS_NOT_BUSY = "peers-not-busy"
    STRAGGLER = "straggler"
    REPORTED = "reported"


@dataclass(frozen=True, slots=True, kw_only=True)
class Utilisation:
    """A pod's GPU utilisation over the straggler window: the peak and the mean over its GPUs
    (percent), and the samples behind them (the fewest of its GPUs)."""

    peak_percent: float
    mean_percent: float
    samples: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StragglerJudgement:
    pod: Pod
    verdict: Verdict
    reason: str
    gang: str = ""
    """The PodGroup, `namespace/name`."""
    utilisation: Utilisation | None = None
    peers: tuple[tuple[str, Utilisation], ...] = ()
    """Each peer's pod key and utilisation, when all were known."""
    reported_at: float | None = None

    @property
    def warned_at(self) -> float | None:
        return self.reported_at

    @property
    def opted_in(self) -> bool:
        return self.pod.labels.get(keys.STRAGGLER_ACTION) == RESTART

    def opa_input(self, now: float, rules: LifetimeRules) -> dict[str, Any]:
        """The lifetime decision's input for a `straggler-restart` (docs/contracts.md)."""
        util = self.utilisation
        return {
            "action": "straggler-restart",
            "pod": self.pod.manifest(),
            "now": int(now),
            "straggler": {
                "gang": self.gang,
                "window_seconds": rules.straggler_window_seconds,
                "peak_util_percent": None if util is None else util.peak_percent,
                "samples": None if util is None else util.samples,
                "peers": [
                    {"pod": key, "mean_util_percent": peer.mean_percent, "samples": peer.samples}
                    for key, peer in self.peers
                ],
                "reported_at": None if self.reported_at is None else int(self.reported_at),
            },
        }


@dataclass(kw_only=True)
class StragglerPlan:
    judgements: list[StragglerJudgement] = field(default_factory=list)
    report: list[StragglerJudgement] = field(default_factory=list)
    restart: list[StragglerJudgement] = field(default_factory=list)
    held: list[StragglerJudgement] = field(default_factory=list)
    """Reported stragglers opted in to a restart that cannot be restarted (a bare pod)."""

    def counts(self) -> dict[str, int]:
        return verdict_counts(self.judgements)


def expected_samples(
    window_seconds: int, scrape_interval_seconds: float, min_sample_coverage: float
) -> int:
    """Samples that make a window's evidence complete (one missed scrape in twenty tolerated
    by default, as for idleness)."""
    return max(1, math.ceil(window_seconds / scrape_interval_seconds * min_sample_coverage))


def _running(pod: Pod) -> bool:
    return pod.phase == "Running" and bool(pod.node_name) and not pod.deleting


def _complete(util: Utilisation | None, expected: int) -> bool:
    return util is not None and util.samples >= expected


def judge(
    pod: Pod,
    peers: list[Pod],
    evidence: dict[tuple[str, str], Utilisation],
    now: float,
    rules: LifetimeRules,
    expected: int,
) -> StragglerJudgement:
    group = pod.annotations.get(GANG_ANNOTATION, "")
    common: dict[str, Any] = {
        "pod": pod,
        "gang": f"{pod.namespace}/{group}",
        "reported_at": annotation_number(pod, keys.STRAGGLER_REPORTED_AT),
    }
    window = rules.straggler_window_seconds
    own = evidence.get((pod.namespace, pod.name))
    if not _complete(own, expected):
        found = "no utilisation series" if own is None else f"{own.samples} samples"
        return StragglerJudgement(
            verdict=Verdict.UNKNOWN,
            reason=f"{found} in the {window}s window, {expected} needed",
            **common,
        )
    assert own is not None
    common["utilisation"] = own
    if own.peak_percent > rules.straggler_util_percent:
        return StragglerJudgement(
            verdict=Verdict.ACTIVE,
            reason=f"peak utilisation {own.peak_percent:g}% above {rules.straggler_util_percent:g}%",
            **common,
        )
    known: list[tuple[str, Utilisation]] = []
    for peer in peers:
        if not _running(peer):
            # A series under its name is an earlier pod's: the gang is not all running.
            return StragglerJudgement(
                verdict=Verdict.UNKNOWN,
                reason=f"peer {peer.key} is {peer.phase}, not running: the gang is not all there",
                **common,
            )
        util = evidence.get((peer.namespace, peer.name))
        if not _complete(util, expected):
            found = "no utilisation series" if util is None else f"{util.samples} samples"
            return StragglerJudgement(
                verdict=Verdict.UNKNOWN,
                reason=f"peer {peer.key} ({peer.phase}): {found} in the {window}s window, "
                f"{expected} needed",
                **common,
            )
        assert util is not None
        known.append((peer.key, util))
    idle = [(key, util) for key, util in known if util.mean_percent < rules.busy_util_percent]
    if idle:
        return StragglerJudgement(
            verdict=Verdict.PEERS_NOT_BUSY,
            reason=f"peak {own.peak_percent:g}%, but peers are not busy: "
            + ", ".join(f"{key} mean {util.mean_percent:g}%" for key, util in idle[:5])
            + f" (busy is {rules.busy_util_percent:g}%)",
            **common,
        )
    common["peers"] = tuple(known)
    why = (
        f"peak utilisation {own.peak_percent:g}% (at most {rules.straggler_util_percent:g}%) over "
        f"{window}s while its {len(known)} peer(s) in PodGroup {common['gang']} averaged at least "
        f"{min(util.mean_percent for _, util in known):g}% (busy is {rules.busy_util_percent:g}%)"
    )
    reported_at = common["reported_at"]
    if reported_at is not None and reported_at <= now and now - reported_at < window:
        return StragglerJudgement(
            verdict=Verdict.REPORTED, reason=f"{why}; reported at {int(reported_at)}", **common
        )
    return StragglerJudgement(verdict=Verdict.STRAGGLER, reason=why, **common)


def plan_stragglers(
    pods: list[Pod],
    evidence: dict[tuple[str, str], Utilisation],
    now: float,
    rules: LifetimeRules,
    expected: int,
) -> StragglerPlan:
    """Judge every running member of every gang of more than one non-terminal pod."""
    plan = StragglerPlan()
    members: dict[tuple[str, str], list[Pod]] = {}
    for pod in pods:
        gang = gang_of(pod)
        if gang is not None and not pod.terminal:
            members.setdefault(gang, []).append(pod)
    for gang in sorted(members):
        group = members[gang]
        if len(group) < 2:
            continue
        for pod in group:
            if not _running(pod):
                continue
            peers = [p for p in group if p.uid != pod.uid]
            judgement = judge(pod, peers, evidence, now, rules, expected)
            plan.judgements.append(judgement)
            if judgement.verdict is Verdict.STRAGGLER:
                plan.report.append(judgement)
            elif judgement.verdict is Verdict.REPORTED and judgement.opted_in:
                if pod.owner is None:
                    plan.held.append(judgement)
                else:
                    plan.restart.append(judgement)
    return plan


def needs_evidence(pods: list[Pod]) -> bool:
    """Whether any gang has two running members: without one, no query is worth making."""
    running: dict[tuple[str, str], int] = {}
    for pod in pods:
        gang = gang_of(pod)
        if gang is not None and _running(pod):
            running[gang] = running.get(gang, 0) + 1
    return any(count > 1 for count in running.values())
