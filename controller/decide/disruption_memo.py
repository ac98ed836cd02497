"""The disruption answers a pass keeps for the next, so that it asks the policy only about the
pods whose answer may have changed.

Every running accelerator pod is judged every pass (decide.disruption). At 80,000 such pods,
asking about all of them cost OPA 8-14 CPU-seconds and the controller about 1.2 a pass
(docs/scale.md), yet an answer can change only when

- the policy's input changes, the clock aside: the pod's metadata (its labels and annotations,
  the controller's own marks among them), its start, its checkpoint, its gang's;
- the policies or data OPA loaded change: the answer names them (`revision`, the policy gate's
  `data.fleetplane.revision`);
- the clock reaches the answer's `recheck_at`: the first instant the same facts are answered
  otherwise (the end of a minimum runtime, a checkpoint growing too old).

So a pass keeps, for each pod it asked and left as its answer wants, a digest of the input with
the clock taken out, and the answer's `recheck_at`, all under the revision that gave them. The
next pass asks again only about a pod whose digest is not kept, was kept under another
revision, or whose `recheck_at` has come; the others need no write (they were left as their
answer wants, and their input, which holds their annotations, is unchanged). A pod the pass
marks is not kept: the mark changes its annotations, so the next pass asks about it once more.
An OPA without a revision, an answer from another revision (a rollout between replicas), a
failed batch: nothing is kept, and those pods are asked next pass as before. The kept answers
are a cache: lost or unreadable, the pass asks about every pod.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from controller.decide.disruption import Answer, Mark
from controller.observe.model import Pod

NEVER = 0
"""A kept answer's `recheck_at` when the clock alone never changes it."""


class Timed(Answer, Protocol):
    """An answer that says how long it holds (`act.opa.Decision`): `recheck_said` when the
    policy gave `recheck_at` (a number, or null for never); an answer that does not say is not
    kept (a policy of your own without it is asked about every pass)."""

    @property
    def recheck_at(self) -> int | None: ...

    @property
    def recheck_said(self) -> bool: ...

    @property
    def revision(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Kept:
    """The answers a pass kept: digest of an input -> its `recheck_at` (NEVER: none), all given
    under `revision`."""

    revision: str | None = None
    answers: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Split:
    """A pass's judged pods: those to ask (with their inputs), and the kept answers that still
    hold (carried to the next pass as they are). `digests`: each judged pod's, by uid."""

    ask: list[tuple[Pod, dict[str, Any]]]
    held: dict[str, int]
    digests: dict[str, str]


def digest(input: dict[str, Any]) -> str:
    """The policy's input with the clock taken out (`now` and `running_seconds` as the start
    they give), hashed: equal for the same facts on every pass."""
    started = input["now"] - input["running_seconds"]
    payload = orjson.dumps(
        (
            started,
            input["pod"],
            input["workload_type"],
            input["checkpoints"],
            input["last_checkpoint"],
            input["gang"],
        ),
        option=orjson.OPT_SORT_KEYS,
    )
    return hashlib.blake2b(payload, digest_size=8).hexdigest()


def split(
    judged: list[tuple[Pod, dict[str, Any]]], kept: Kept, revision: str | None, now: float
) -> Split:
    """Which judged pods to ask: all of them when there is no revision or the kept answers
    were given under another; else those whose input is not kept or whose recheck has come."""
    digests = {pod.uid: digest(input) for pod, input in judged}
    if revision is None or kept.revision != revision:
        return Split(ask=judged, held={}, digests=digests)
    ask: list[tuple[Pod, dict[str, Any]]] = []
    held: dict[str, int] = {}
    answers = kept.answers
    for pod, input in judged:
        key = digests[pod.uid]
        recheck = answers.get(key)
        if recheck is None or (recheck != NEVER and now >= recheck):
            ask.append((pod, input))
        else:
            held[key] = recheck
    return Split(ask=ask, held=held, digests=digests)


def keep(
    split: Split,
    answers: list[tuple[Pod, Timed | None]],
    marks: list[Mark],
    revision: str | None,
    now: float,
) -> Kept:
    """What the next pass may rely on: the answers still held, and the pass's answers given
    under `revision` for pods it left as they are (no mark), whose recheck is still ahead."""
    if revision is None:
        return Kept()
    marked = {mark.pod.uid for mark in marks}
    out = dict(split.held)
    for pod, answer in answers:
        if answer is None or pod.uid in marked or answer.revision != revision:
            continue
        if not answer.recheck_said:
            continue
        recheck = answer.recheck_at
        if recheck is None:
            out[split.digests[pod.uid]] = NEVER
        elif recheck > now:
            out[split.digests[pod.uid]] = recheck
    return Kept(revision=revision, answers=out)
