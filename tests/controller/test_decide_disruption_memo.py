"""The disruption answers kept between passes, pure (controller/decide/disruption_memo.py): which
pods a pass asks about, and what it keeps for the next."""

from __future__ import annotations

from dataclasses import replace

from controller.act.opa import Decision
from controller.decide.disruption import Change, Mark, facts
from controller.decide.disruption_memo import NEVER, Kept, digest, keep, split
from tests.controller.builders import NOW, a_pod

REV = "rev-1"


def pods() -> list:
    return [
        a_pod("a").type("training").gpus(1).on("gpu-1", started=NOW - 7200).build(),
        a_pod("b").type("training").gpus(1).on("gpu-1", started=NOW - 7200).checkpoint(NOW - 60).build(),
    ]  # fmt: skip


def answer(recheck: int | None, *, said: bool = True, revision: str | None = REV) -> Decision:
    return Decision(
        allow=True, reasons=("ok",), recheck_at=recheck, recheck_said=said, revision=revision
    )


def test_the_digest_takes_the_clock_out_and_keeps_every_fact() -> None:
    [(pod, first)] = facts(pods()[:1], NOW)
    [(_, later)] = facts([pod], NOW + 3600.5)
    assert digest(first) == digest(later)
    marked = replace(pod, annotations={**pod.annotations, "karpenter.sh/do-not-disrupt": "true"})
    [(_, changed)] = facts([marked], NOW)
    assert digest(changed) != digest(first)
    restarted = replace(pod, started=pod.started + 1)
    [(_, moved)] = facts([restarted], NOW)
    assert digest(moved) != digest(first)


def test_a_pass_asks_only_what_is_not_kept_or_due() -> None:
    judged = facts(pods(), NOW)
    a, b = (digest(given) for _, given in judged)
    kept = Kept(revision=REV, answers={a: NEVER, b: int(NOW) + 100})
    plan = split(judged, kept, REV, NOW)
    assert plan.ask == [] and plan.held == {a: NEVER, b: int(NOW) + 100}
    # b's recheck comes: b asked, a still held
    plan = split(judged, kept, REV, NOW + 100)
    assert [pod.name for pod, _ in plan.ask] == ["b"] and plan.held == {a: NEVER}
    # another revision, or none: every pod asked
    assert len(split(judged, kept, "rev-2", NOW).ask) == 2
    assert len(split(judged, kept, None, NOW).ask) == 2
    assert len(split(judged, Kept(), REV, NOW).ask) == 2


def test_only_answers_that_hold_are_kept() -> None:
    judged = facts(pods(), NOW)
    plan = split(judged, Kept(), REV, NOW)
    (pa, _), (pb, _) = judged
    a, b = plan.digests[pa.uid], plan.digests[pb.uid]

    def kept(answers: list, marks: list[Mark] = []) -> dict[str, int]:  # noqa: B006
        return keep(plan, answers, marks, REV, NOW).answers

    assert kept([(pa, answer(None)), (pb, answer(int(NOW) + 840))]) == {
        a: NEVER,
        b: int(NOW) + 840,
    }
    # no answer; a mark (the pod's annotations change); another revision; a policy that does
    # not say how long its answer holds; a recheck already due: none of them kept
    assert kept([(pa, None)]) == {}
    assert kept([(pa, answer(None))], [Mark(pod=pa, change=Change.PROTECT, reason="x")]) == {}
    assert kept([(pa, answer(None, revision="rev-0"))]) == {}
    assert kept([(pa, answer(None, said=False))]) == {}
    assert kept([(pa, answer(int(NOW)))]) == {}
    # without a revision nothing is kept at all
    assert keep(plan, [(pa, answer(None))], [], None, NOW) == Kept()


def test_a_decision_says_how_long_it_holds_only_when_the_answer_does() -> None:
    from controller.act.opa import decision_of  # the parsing of OPA's answers

    said = decision_of({"allow": True, "reasons": [], "recheck_at": 17, "revision": "r"})
    assert said is not None and (said.recheck_at, said.recheck_said, said.revision) == (
        17,
        True,
        "r",
    )
    never = decision_of({"allow": True, "reasons": [], "recheck_at": None})
    assert never is not None and (never.recheck_at, never.recheck_said) == (None, True)
    silent = decision_of({"allow": True, "reasons": []})
    assert silent is not None and (silent.recheck_said, silent.revision) == (False, None)
    odd = decision_of({"allow": True, "recheck_at": 1.5, "revision": 3})
    assert odd is not None and (odd.recheck_said, odd.revision) == (False, None)
