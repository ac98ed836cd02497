"""Admission answers asked ahead (with the period's query) are used only for exactly the
review, clock and spend document they were asked with."""

from __future__ import annotations

from replay.opa import Admission, AnswersAhead

REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {"uid": "replay-7-1", "name": "pod-7-1", "object": {"kind": "Pod"}},
}
SPEND = {"research": {"month": "2026-05", "usd": 61.5, "updated_at": 1}}
NOW_NS = 1_777_777_777_000_000_000
DENY = Admission(allowed=False, messages=("budget: over",), warnings=())


def test_an_answer_is_taken_once_for_the_same_review_clock_and_spend() -> None:
    ahead = AnswersAhead()
    ahead.put(REVIEW, NOW_NS, SPEND, DENY)
    same = {"request": dict(REVIEW["request"]), "kind": "AdmissionReview"} | {
        "apiVersion": "admission.k8s.io/v1"
    }  # equal content, other objects and key order
    assert ahead.take(same, NOW_NS, {"research": dict(SPEND["research"])}) == DENY
    assert ahead.take(REVIEW, NOW_NS, SPEND) is None  # taken already
    assert ahead.taken == 1


def test_another_spend_month_clock_or_review_gets_a_fresh_decision() -> None:
    ahead = AnswersAhead()
    ahead.put(REVIEW, NOW_NS, SPEND, DENY)
    more = {"research": {**SPEND["research"], "usd": 61.51}}
    other_month = {"research": {**SPEND["research"], "month": "2026-06"}}
    other_pod = {**REVIEW, "request": {**REVIEW["request"], "uid": "replay-7-2"}}
    assert ahead.take(REVIEW, NOW_NS, more) is None
    assert ahead.take(REVIEW, NOW_NS, other_month) is None
    assert ahead.take(REVIEW, NOW_NS, {}) is None
    assert ahead.take(REVIEW, NOW_NS + 1, SPEND) is None  # the clock, to the nanosecond
    assert ahead.take(other_pod, NOW_NS, SPEND) is None
    ahead.clear()
    assert ahead.take(REVIEW, NOW_NS, SPEND) is None  # a new period forgets them
    assert ahead.taken == 0
