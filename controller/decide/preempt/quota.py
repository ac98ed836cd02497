"""What the victims' teams hold and must keep: a team's guarantee checked against every victim of
that team chosen before, and the usage each victim is judged with."""

from __future__ import annotations

from dataclasses import dataclass

from controller.config import FleetView
from controller.decide.preempt.model import Candidate


@dataclass(frozen=True, slots=True, kw_only=True)
class Quota:
    """What the victims' teams hold (devices per family) and must keep. A victim of another
    team than the preemptor's is taken only while its team, after losing it *and every victim
    of that team chosen before it*, still holds at least its guaranteed quota: checking each
    victim against the team's usage alone would let two victims together take more than the
    team can lose."""

    usage: dict[str, dict[str, int]]
    guaranteed: dict[str, dict[str, int]]
    team: str | None
    """The preemptor's team: within one team priority alone orders the work."""

    @classmethod
    def of(cls, fleet: FleetView, usage: dict[str, dict[str, int]], team: str | None) -> Quota:
        return cls(
            usage=usage,
            guaranteed={name: dict(t.guaranteed) for name, t in fleet.teams.items()},
            team=team,
        )

    def held_after(self, team: str, taken: dict[str, dict[str, int]]) -> dict[str, int]:
        """The team's usage once the victims in `taken` (devices per team and family) go."""
        held = dict(self.usage.get(team, {}))
        for fam, n in taken.get(team, {}).items():
            held[fam] = held.get(fam, 0) - n
        return held

    def keeps(self, candidate: Candidate, taken: dict[str, dict[str, int]]) -> bool:
        """Whether the candidate's team keeps its guarantee after losing it (and its gang mates)
        too."""
        team = candidate.team
        if team is None or team == self.team:
            return True
        guaranteed = self.guaranteed.get(team, {})
        held = self.held_after(team, taken)
        return all(
            held.get(fam, 0) - n >= guaranteed.get(fam, 0) for fam, n in candidate.families.items()
        )


def _count(ledger: dict[str, dict[str, int]], candidate: Candidate, sign: int) -> None:
    if candidate.team is None:
        return
    held = ledger.setdefault(candidate.team, {})
    for fam, n in candidate.families.items():
        held[fam] = held.get(fam, 0) + sign * n


def take(taken: dict[str, dict[str, int]], candidate: Candidate) -> None:
    """Count the candidate's devices (per family) as taken from its team."""
    _count(taken, candidate, 1)


def release(usage: dict[str, dict[str, int]], candidate: Candidate) -> None:
    """Count the devices of an evicted candidate (per family) as no longer held by its team."""
    _count(usage, candidate, -1)


AnswerKey = tuple[str, tuple[tuple[str, int], ...]]
"""An OPA answer about a victim, kept by (its uid, the usage of its team it was asked with)."""


def asked_usages(
    victims: list[Candidate], quota: Quota
) -> list[tuple[Candidate, dict[str, int], AnswerKey]]:
    """Each victim of a selection with what OPA is asked about it: its team's usage once the
    victims before it are gone (asking each with the unreduced usage would let all of them
    pass together), and the key an answer to that question is kept under."""
    taken: dict[str, dict[str, int]] = {}
    out: list[tuple[Candidate, dict[str, int], AnswerKey]] = []
    for victim in victims:
        held = quota.held_after(victim.team or "", taken)
        take(taken, victim)
        out.append((victim, held, (victim.pod.uid, tuple(sorted(held.items())))))
    return out
