"""The disruption concern end to end: the real control plane (kwok GPU nodes), the real OPA with
the project's policies. Karpenter's contract is the pod annotation `karpenter.sh/do-not-disrupt`:
the controller sets it on work an autoscaler would lose (an uncheckpointed gang, a stale
checkpoint, a minimum runtime not reached) and clears only its own when the reason is gone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from localfleet.servers import OpaServer
from tests.controller.conftest import (
    Harness,
    annotations_of,
    answers_kept,
    bare_pod,
    closed_url,
    started_at,
)

pytestmark = pytest.mark.integration


@pytest.fixture(params=["asked every pass", "answers kept between passes"])
def harness(
    request: pytest.FixtureRequest, harness: Harness, opa_server: OpaServer
) -> Iterator[Harness]:
    """Every test here twice: against an OPA without a revision (every pod asked every pass, as
    a policy of your own without `recheck_at` is) and against one with a revision and a place
    to keep the answers, as the gate runs (controller/decide/disruption_memo.py): the same
    marks, the same writes, on fewer questions."""
    if request.param == "asked every pass":
        yield harness
        return
    with answers_kept(harness, opa_server):
        yield harness


KARPENTER = "karpenter.sh/do-not-disrupt"
OURS = "fleetplane.dev/do-not-disrupt-by"
CHECKPOINT = "fleetplane.dev/last-checkpoint"
GANG = "scheduling.k8s.io/group-name"
REASON = "fleetplane.dev/do-not-disrupt-reason"


def gang_member(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    pod = bare_pod(name, "training")
    pod["metadata"]["annotations"] = {
        GANG: "train-gang",
        "fleetplane.dev/checkpoint-location": "s3://checkpoints/train",
        **(annotations or {}),
    }
    return pod


def record_checkpoint(h: Harness, name: str, at: float) -> None:
    h.client.merge_patch(
        f"/api/v1/namespaces/{h.namespace}/pods/{name}",
        {"metadata": {"annotations": {CHECKPOINT: str(int(at))}}},
    )


def test_an_uncheckpointed_gang_is_protected_until_it_checkpoints(harness: Harness) -> None:
    h = harness
    h.create(gang_member("gang-0"))
    h.create(gang_member("gang-1"))
    pods = h.wait_running("fleetplane.dev/workload-type=training", count=2)
    now = max(started_at(p) for p in pods) + 7200

    run = h.run(now, concerns=("disruption",))
    assert run.actions("disruption.protect") == 2
    for name in ("gang-0", "gang-1"):
        found = annotations_of(h.pod(name))
        assert found[KARPENTER] == "true"
        assert found[OURS] == "controller"
        assert "gang" in found["fleetplane.dev/do-not-disrupt-reason"]
        assert "DisruptionProtected" in h.reasons(name)

    # A second pass with nothing changed writes nothing.
    assert h.run(now + 30, concerns=("disruption",)).actions("disruption.protect") == 0

    # One member checkpoints: the gang's oldest checkpoint is still none, both stay protected.
    record_checkpoint(h, "gang-0", now + 50)
    run = h.run(now + 60, concerns=("disruption",))
    assert run.actions("disruption.unprotect") == 0
    assert annotations_of(h.pod("gang-1"))[KARPENTER] == "true"

    # The whole gang checkpointed: both are cleared, with an Event saying why.
    record_checkpoint(h, "gang-1", now + 70)
    run = h.run(now + 90, concerns=("disruption",))
    assert run.actions("disruption.unprotect") == 2
    for name in ("gang-0", "gang-1"):
        found = annotations_of(h.pod(name))
        assert KARPENTER not in found and OURS not in found
        assert "DisruptionUnprotected" in h.reasons(name)

    # Its checkpoint ages past the upgrade drain's 900 s: protected again.
    run = h.run(now + 50 + 901, concerns=("disruption",))
    assert run.actions("disruption.protect") == 2


def test_minimum_runtime_and_a_users_own_protection(harness: Harness) -> None:
    h = harness
    h.create(bare_pod("young", "training"))
    theirs = bare_pod("theirs", "training")
    theirs["metadata"]["annotations"] = {KARPENTER: "true"}
    h.create(theirs)
    pods = h.wait_running("fleetplane.dev/workload-type=training", count=2)
    started = {p["metadata"]["name"]: started_at(p) for p in pods}
    minimum = h.document["workload_types"]["training"]["min_runtime_seconds"]
    assert minimum > 0
    now = started["young"] + minimum - 60

    h.run(now, concerns=("disruption",))
    found = annotations_of(h.pod("young"))
    assert found[KARPENTER] == "true"
    assert "minimum runtime" in found["fleetplane.dev/do-not-disrupt-reason"]
    assert OURS not in annotations_of(h.pod("theirs"))

    later = max(started.values()) + minimum + 60
    run = h.run(later, concerns=("disruption",))
    assert run.actions("disruption.unprotect") == 1
    assert KARPENTER not in annotations_of(h.pod("young"))
    # The user's own annotation is never cleared.
    assert annotations_of(h.pod("theirs"))[KARPENTER] == "true"


def test_dry_run_writes_nothing_and_no_answer_unprotects_nothing(harness: Harness) -> None:
    h = harness
    h.create(gang_member("solo-0"))
    h.create(gang_member("solo-1"))
    pods = h.wait_running("fleetplane.dev/workload-type=training", count=2)
    now = max(started_at(p) for p in pods) + 7200

    run = h.run(now, concerns=("disruption",), dry_run=True)
    assert "DRY-RUN disruption: would protect" in run.out
    assert KARPENTER not in annotations_of(h.pod("solo-0"))

    h.run(now, concerns=("disruption",))
    assert annotations_of(h.pod("solo-0"))[KARPENTER] == "true"
    for name in ("solo-0", "solo-1"):
        record_checkpoint(h, name, now + 10)
    # OPA down: no answer, so nothing is unprotected although the gang checkpointed.
    run = h.run(now + 20, concerns=("disruption",), opa_url=closed_url())
    assert run.actions("disruption.unprotect") == 0
    assert annotations_of(h.pod("solo-0"))[KARPENTER] == "true"
    assert run.summary.errors > 0


def protected_events(h: Harness, name: str) -> int:
    """`DisruptionProtected` Events said about the pod, each repeat counted (the same Event
    again raises the count of the one already there)."""
    return sum(
        int(e.get("count") or 1) for e in h.events(name) if e["reason"] == "DisruptionProtected"
    )


def test_a_protection_is_written_once_while_its_facts_hold(harness: Harness) -> None:
    """The reason names instants (the start, the checkpoint), not ages, so a later pass over the
    same facts finds the reason it wrote and writes nothing: no patch, no Event. Reasons that
    named ages ("running 5s") made a write and an Event per protected pod every pass."""
    h = harness
    h.create(bare_pod("young", "training"))
    h.create(gang_member("stale-0"))
    h.create(gang_member("stale-1"))
    pods = h.wait_running("fleetplane.dev/workload-type=training", count=3)
    started = {p["metadata"]["name"]: started_at(p) for p in pods}
    minimum = h.document["workload_types"]["training"]["min_runtime_seconds"]
    assert minimum >= 4
    # two passes inside every pod's minimum runtime
    first = max(started.values()) + 2
    second = first + minimum // 2
    assert second < min(started.values()) + minimum
    for name in ("stale-0", "stale-1"):
        record_checkpoint(h, name, first - 2000)

    names = ("young", "stale-0", "stale-1")

    def written() -> dict[str, tuple[str, str, int]]:
        return {
            name: (
                h.pod(name)["metadata"]["resourceVersion"],
                annotations_of(h.pod(name)).get(REASON, ""),
                protected_events(h, name),
            )
            for name in names
        }

    # All three inside their minimum runtime, the gang's checkpoint stale too: one write each.
    assert h.run(first, concerns=("disruption",)).actions("disruption.protect") == 3
    once = written()
    assert [events for _, _, events in once.values()] == [1, 1, 1]
    assert "protected until" in once["young"][1]
    assert "its oldest checkpoint at" in once["stale-0"][1]
    # A later pass over the same facts: the same reasons, nothing written, no Event.
    assert h.run(second, concerns=("disruption",)).actions("disruption.protect") == 0
    assert written() == once

    # Past the minimum runtime (young is cleared), the gang protected by its stale checkpoint
    # alone: its reason changed, written once more; then an hour of passes writes nothing.
    later = max(started.values()) + minimum + 60
    run = h.run(later, concerns=("disruption",))
    assert run.actions("disruption.protect") == 2
    assert run.actions("disruption.unprotect") == 1
    gang = {name: marks for name, marks in written().items() if name != "young"}
    assert all(events == 2 for _, _, events in gang.values())
    assert "running since" not in gang["stale-0"][1]
    for now in (later + 30, later + 3600):
        assert h.run(now, concerns=("disruption",)).actions("disruption.protect") == 0
        assert {k: v for k, v in written().items() if k != "young"} == gang
