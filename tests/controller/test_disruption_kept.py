"""The disruption answers kept between passes (controller/decide/disruption_memo.py), on the real
control plane and the real OPA with the project's policies and a loaded revision: a pass asks
the policy only about the pods whose answer may have changed (new facts, a recheck instant
reached, another revision), and the marks are the ones asking every pod would give."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from controller.observe.kube import label_selector, object_path
from fleet.disruption_kept import KEY, LABEL, PARTS
from localfleet.servers import OpaServer
from tests.controller.conftest import (
    KEPT,
    Harness,
    Run,
    annotations_of,
    answers_kept,
    bare_pod,
    started_at,
)
from tests.controller.test_disruption import (
    CHECKPOINT,
    KARPENTER,
    gang_member,
    record_checkpoint,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def kept(harness: Harness, opa_server: OpaServer) -> Iterator[Harness]:
    with answers_kept(harness, opa_server):
        yield harness


def asked(run: Run) -> set[str]:
    return {line["pod"].split("/", 1)[1] for line in run.mine("disruption.ask")}


def parts(h: Harness) -> dict[str, tuple[str, str]]:
    """The kept answers' ConfigMaps in the test's namespace, by name: their resourceVersion and
    answers."""
    found = h.client.list(
        object_path("v1", "configmaps", h.namespace, None),
        params={"labelSelector": label_selector(LABEL)},
    )
    return {
        c["metadata"]["name"]: (c["metadata"]["resourceVersion"], (c.get("data") or {})[KEY])
        for c in found
    }


def rewritten(before: dict[str, tuple[str, str]], after: dict[str, tuple[str, str]]) -> set[str]:
    """The parts written again though their answers are the same. A pass keeps the answers of
    every pod it judged, and the cluster is shared: other tests' pods come and go between two
    passes (their namespaces are deleted without waiting), and the parts that hold them change
    with them; a part whose answers did not change must not be written."""
    return {
        name
        for name, (version, answers) in after.items()
        if name in before and before[name][1] == answers and before[name][0] != version
    }


def checkpointed(name: str, at: float) -> dict[str, Any]:
    pod = bare_pod(name, "training")
    pod["metadata"]["annotations"] = {
        "fleetplane.dev/checkpoint-location": "s3://checkpoints/fresh",
        CHECKPOINT: str(int(at)),
    }
    return pod


def test_a_pass_asks_only_about_pods_whose_answer_may_have_changed(
    kept: Harness, opa_server: OpaServer
) -> None:
    h = kept
    h.create(gang_member("stale-0"))
    h.create(gang_member("stale-1"))
    h.create(bare_pod("plain", "training"))
    h.create(checkpointed("fresh", 0))  # re-recorded below, once the start is known
    pods = h.wait_running("fleetplane.dev/workload-type=training", count=4)
    minimum = h.document["workload_types"]["training"]["min_runtime_seconds"]
    t = max(started_at(p) for p in pods) + minimum + 60  # every pod past its minimum runtime
    record_checkpoint(h, "fresh", t - 100)
    for name in ("stale-0", "stale-1"):
        record_checkpoint(h, name, t - 2000)
    everyone = {"stale-0", "stale-1", "plain", "fresh"}

    # First pass: nothing kept, every pod asked; the gang protected by its stale checkpoint.
    run = h.run(t, concerns=("disruption",))
    assert asked(run) == everyone
    assert run.actions("disruption.protect") == 2
    assert len(parts(h)) == PARTS

    # The marks changed the gang's annotations (its input): asked once more, nothing written.
    run = h.run(t + 30, concerns=("disruption",))
    assert asked(run) == {"stale-0", "stale-1"}
    assert run.actions("disruption.protect") == 0

    # Nothing changed: nobody asked, the parts not rewritten, the marks as they were.
    before = parts(h)
    run = h.run(t + 60, concerns=("disruption",))
    assert asked(run) == set()
    assert rewritten(before, parts(h)) == set()
    # the pass's figures say so (other tests' pods may run in the shared cluster: at least ours)
    assert run.summary.get("disruption_answers", source="kept") >= 4
    assert annotations_of(h.pod("stale-0"))[KARPENTER] == "true"
    assert KARPENTER not in annotations_of(h.pod("fresh"))

    # A new checkpoint is a new fact: that pod alone is asked.
    record_checkpoint(h, "fresh", t + 100)
    assert asked(h.run(t + 120, concerns=("disruption",))) == {"fresh"}

    # Its recheck instant (the checkpoint older than 900 s) comes with no change of facts: it
    # is asked and protected, exactly as asking every pass would have.
    assert asked(h.run(t + 100 + 900, concerns=("disruption",))) == set()
    run = h.run(t + 100 + 901, concerns=("disruption",))
    assert asked(run) == {"fresh"}
    assert run.actions("disruption.protect") == 1
    assert annotations_of(h.pod("fresh"))[KARPENTER] == "true"

    # Another revision of the policies and data (a new policy rolled out): every pod asked.
    h.run(t + 100 + 930, concerns=("disruption",))  # the mark's new facts, asked once
    opa_server.put_data("fleetplane/revision", "test-revision-2")
    assert asked(h.run(t + 100 + 960, concerns=("disruption",))) == everyone

    # A dry run reads what is kept but writes none of it.
    before = parts(h)
    h.run(t + 100 + 990, concerns=("disruption",), dry_run=True)
    assert parts(h) == before


def test_without_a_revision_every_pod_is_asked_and_nothing_kept(harness: Harness) -> None:
    """An OPA without `data.fleetplane.revision` (a hand-run OPA, a policy of your own): every
    pod asked every pass, as before, and nothing written to keep."""
    h = harness
    h.create(bare_pod("plain", "training"))
    pods = h.wait_running("fleetplane.dev/workload-type=training", count=1)
    t = started_at(pods[0]) + 7200
    settings = {"opa_data_configmap": f"{h.namespace}/{KEPT}"}
    for now in (t, t + 30):
        assert asked(h.run(now, concerns=("disruption",), **settings)) == {"plain"}
    assert parts(h) == {}
