"""The admission cases of the operators' kinds (issue 30 item 3: judged whole, restarts and
retries priced) and of issue 33's classes 3 (nothing a user writes becomes platform data by
passing through a trusted controller) and 5 (owner references only the platform writes).
Appended to tests/policies/cases.py's table, so they reach the review corpus too."""

from __future__ import annotations

from tests.policies.builders import Workload, training
from tests.policies.operator_kinds import (
    EXEMPT,
    jobset,
    leaderworkerset,
    owned_pod,
    raycluster,
    rayjob,
    training_runtime,
    trainjob,
    volcano_cronjob,
)

FOREIGN_JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "name": "someone-elses",
    "uid": "6b1c1f0e-0000-4000-8000-000000000001",
    "controller": True,
}

OPERATOR_CASES: list[tuple[str, Workload, set[str]]] = [
    # JobSet: every replicated job's Jobs x pods, restarts of the whole set priced
    ("training jobset", jobset(training(), jobs=2), set()),
    (
        "training jobset over the maximum as a whole",
        jobset(training(), jobs=5, parallelism=2),
        {"max-accelerators", "approval"},
    ),
    ("training jobset restarting three times", jobset(training(), jobs=2, maxRestarts=3), set()),
    (
        "training jobset restarting without bound",
        jobset(
            training(),
            jobs=2,
            maxRestarts=1,
            rules=[{"action": "RestartJobSetAndIgnoreMaxRestarts"}],
        ),
        {"budget"},
    ),
    # LeaderWorkerSet: groups x size, and the groups a rollout surges
    ("training leaderworkerset", leaderworkerset(training(), groups=1, size=2), set()),
    (
        "training leaderworkerset surging past the maximum",
        leaderworkerset(training(), groups=4, size=2, max_surge=1).approved(),
        {"max-accelerators", "approval"},
    ),
    # KubeRay: the head and every worker group up to its autoscaling bound
    ("training raycluster", raycluster(training(), max_replicas=3), set()),
    (
        "training raycluster of multi-host groups over the maximum",
        raycluster(training(), max_replicas=3, hosts=3),
        {"max-accelerators", "approval"},
    ),
    (
        "training raycluster autoscaling without a maximum",
        raycluster(training(), max_replicas=None),
        {"unbounded-holding"},
    ),
    ("training rayjob retried twice", rayjob(training(), backoff_limit=2), set()),
    # Kubeflow Trainer: the trainer's nodes (the runtime is not the gate's to see)
    ("training trainjob", trainjob(training(), nodes=2), set()),
    (
        "training trainjob over the maximum",
        trainjob(training(), nodes=9),
        {"max-accelerators", "approval"},
    ),
    ("training trainjob without numnodes", trainjob(training(), nodes=None), {"unbounded-holding"}),
    # issue 33, class 3: what a trusted controller would copy is judged where the user wrote it
    (
        "trainjob labels trainer would copy as exempt",
        trainjob(training(), labels=EXEMPT),
        {"platform-owned"},
    ),
    (
        "trainingruntime with an exempt template",
        training_runtime(training().label("fleetplane.dev/exempt", "true")),
        {"platform-owned"},
    ),
    ("trainingruntime holding nothing itself", training_runtime(training().gpus("80")), set()),
    (
        "volcano cronjob with an exempt template",
        volcano_cronjob(training().label("fleetplane.dev/exempt", "true")),
        {"platform-owned"},
    ),
    (
        "jobset job template exempt that jobset would copy onto its jobs",
        jobset(training(), jobs=2, job_labels=EXEMPT),
        {"platform-owned"},
    ),
    (
        "raycluster worker template exempt",
        raycluster(training().label("fleetplane.dev/exempt", "true")),
        {"platform-owned"},
    ),
    (
        "raycluster naming another team's queue for its podgroup",
        raycluster(training(), labels={"volcano.sh/queue-name": "serving"}),
        {"queue"},
    ),
    # issue 33, class 5: owner references decide approvals, reservations and what is stopped
    (
        "pod naming another workload's job as owner",
        owned_pod(training(), FOREIGN_JOB),
        {"owner-reference"},
    ),
    (
        "job controller's pod naming its job",
        owned_pod(training(), FOREIGN_JOB).by("system:serviceaccount:kube-system:job-controller"),
        set(),
    ),
]
