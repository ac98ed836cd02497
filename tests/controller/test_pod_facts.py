"""`observe.facts.owner_of`: the owner a pod names, or the Job that let go of it (by its labels),
as every concern reads it (`Pod.owner_key`)."""

from __future__ import annotations

from controller.observe.facts import VOLCANO_JOB_API, OwnerKey, owner_of


def test_a_released_job_pod_is_found_by_either_label_pair_and_only_with_both() -> None:
    job = OwnerKey("batch/v1", "Job", "ns", "run", "u-1")
    new = {"batch.kubernetes.io/controller-uid": "u-1", "batch.kubernetes.io/job-name": "run"}
    old = {"controller-uid": "u-1", "job-name": "run"}
    assert owner_of("ns", None, new) == job
    assert owner_of("ns", None, old) == job
    # The first non-empty label of each pair counts: an empty new label falls back to the old.
    mixed = {"batch.kubernetes.io/controller-uid": "", "controller-uid": "u-1", "job-name": "run"}
    assert owner_of("ns", None, mixed) == job
    # A uid without a name (or a name without a uid) names no Job; Volcano's label still does.
    assert owner_of("ns", None, {"controller-uid": "u-1"}) is None
    assert owner_of("ns", None, {"job-name": "run"}) is None
    volcano = {"job-name": "run", "volcano.sh/job-name": "vj"}
    assert owner_of("ns", None, volcano) == OwnerKey(VOLCANO_JOB_API, "Job", "ns", "vj", "")
    assert owner_of("ns", None, {}) is None
