"""act.disruption asks the policy for many pods a request (`Opa.decide_each`): every pod is
asked once, in batches of `BATCH`, each answer goes to its own pod, and a batch that fails or an
answer that is missing leaves its pods without an answer (reported per pod), never others'."""

from __future__ import annotations

import io
from typing import Any

from controller.act import disruption
from controller.act.events import EventRecorder
from controller.act.opa import Decision
from controller.act.runtime import Runtime
from controller.config import Settings
from controller.errors import TemporaryError
from controller.summary import Summary
from tests.controller.builders import NOW, a_pod, fleet
from tests.controller.test_idle_writes import ScriptedKube


class BatchOpa:
    """Allows a pod when its `running_seconds` is even; fails the batches it is told to; leaves
    out the answers of the keys it is told to."""

    def __init__(
        self, *, fail: frozenset[int] = frozenset(), drop: frozenset[str] = frozenset()
    ) -> None:
        self.fail, self.drop = fail, drop
        self.batches: list[dict[str, dict[str, Any]]] = []

    def decide_each(self, name: str, inputs: dict[str, dict[str, Any]]) -> dict[str, Decision]:
        assert name == "disruption"
        self.batches.append(inputs)
        if len(self.batches) - 1 in self.fail:
            raise TemporaryError("opa: read timed out")
        return {
            key: Decision(allow=one["running_seconds"] % 2 == 0, reasons=(key,))
            for key, one in inputs.items()
            if key not in self.drop
        }


def runtime(opa: BatchOpa) -> Runtime:
    kube = ScriptedKube({})
    return Runtime(
        kube=kube,  # type: ignore[arg-type]
        opa=opa,  # type: ignore[arg-type]
        fleet=fleet(),
        settings=Settings(
            prometheus_url="http://unused", opa_url="http://unused", act_concurrency=1
        ),
        now=NOW,
        summary=Summary(dry_run=False),
        out=io.StringIO(),
        events=EventRecorder(kube, dry_run=False),  # type: ignore[arg-type]
    )


def judged(count: int) -> list[tuple[Any, dict[str, Any]]]:
    pods = [a_pod(f"p-{i}").type("training").gpus(1).on("n1").build() for i in range(count)]
    return [(pod, {"running_seconds": i}) for i, pod in enumerate(pods)]


def test_every_pod_is_asked_once_in_batches_and_answered_its_own() -> None:
    opa = BatchOpa()
    items = judged(2 * disruption.BATCH + 3)
    answers = disruption.ask(runtime(opa), items)
    assert [len(b) for b in opa.batches] == [disruption.BATCH, disruption.BATCH, 3]
    assert [pod.name for pod, _ in answers] == [pod.name for pod, _ in items]
    for i, (_, answer) in enumerate(answers):
        assert answer is not None and answer.allow == (i % 2 == 0)


def test_a_failed_batch_or_a_missing_answer_leaves_only_those_pods_unanswered() -> None:
    opa = BatchOpa(fail=frozenset({1}), drop=frozenset({"4"}))
    rt = runtime(opa)
    answers = disruption.ask(rt, judged(2 * disruption.BATCH))
    unanswered = [i for i, (_, answer) in enumerate(answers) if answer is None]
    assert unanswered == [4, *range(disruption.BATCH, 2 * disruption.BATCH)]
    assert rt.summary.errors == len(unanswered)
