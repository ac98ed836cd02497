"""The admission cases of issue 33's classes "tie the platform's hands" (disruption budgets
that leave no eviction, preemptors whose placement the controller cannot model) and "hold
more during its life" (a relabel of an admitted pod). Appended to tests/policies/cases.py's
table, so they reach the review corpus too."""

from __future__ import annotations

from tests.policies.builders import Workload, inference, training
from tests.policies.operator_kinds import disruption_budget

TRAINERS = {"matchLabels": {"app": "trainer"}}
CPU_ONLY = {
    "matchLabels": {"app": "web"},
    "matchExpressions": [{"key": "fleetplane.dev/workload-type", "operator": "DoesNotExist"}],
}
POD_TERM = {
    "labelSelector": {"matchLabels": {"app": "trainer"}},
    "topologyKey": "kubernetes.io/hostname",
}


SHARDED = {"matchLabels": {"app": "sharded-trainer"}}
CORPUS_WORKLOADS = {
    "ml-research": {
        "statefulsets.apps/sharded-trainer": {
            "uid": "corpus-sharded-trainer",
            "kind": "StatefulSet",
            "workload_type": "training",
            "devices_per_replica": 8,
            "approval_id": None,
            "replicas": 4,
            "pod_labels": {"app": "sharded-trainer", "fleetplane.dev/workload-type": "training"},
        }
    }
}
"""The controller's records (data.fleetplane.workloads) the cases are judged with: a training
StatefulSet of 4 replicas that a disruption budget by count selects. policyreview/corpus/
workloads.json is this document (a test keeps the two in step)."""


def spread(when: str) -> list[dict[str, object]]:
    return [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {"app": "trainer"}},
        }
    ]


LIFETIME_CASES: list[tuple[str, Workload, set[str]]] = [
    # disruption budgets: the controller evicts through the Eviction API
    (
        "disruption budget leaving one eviction",
        disruption_budget(selector=TRAINERS, maxUnavailable=1),
        set(),
    ),
    (
        "disruption budget leaving no eviction",
        disruption_budget(selector=TRAINERS, maxUnavailable=0),
        {"eviction-budget"},
    ),
    (
        "disruption budget keeping every pod",
        disruption_budget(selector=TRAINERS, minAvailable="100%"),
        {"eviction-budget"},
    ),
    (
        "cpu service's disruption budget keeping every pod",
        disruption_budget(selector=CPU_ONLY, maxUnavailable=0),
        set(),
    ),
    (
        "disruption budget keeping as many pods as its workload runs",
        disruption_budget(selector=SHARDED, minAvailable=4),
        {"eviction-budget"},
    ),
    (
        "disruption budget keeping all but one of its workload's pods",
        disruption_budget(selector=SHARDED, minAvailable=3),
        set(),
    ),
    # preemptors the controller's preemption model cannot reason about
    (
        "training pod with required pod anti-affinity",
        training().placed(
            affinity={
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [POD_TERM]}
            }
        ),
        {"unmodellable-placement"},
    ),
    (
        "training pod with preferred pod anti-affinity",
        training().placed(
            affinity={
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 50, "podAffinityTerm": POD_TERM}
                    ]
                }
            }
        ),
        set(),
    ),
    # required pod affinity: refused unless the type allows it (the fixture: inference)
    (
        "training pod with required pod affinity",
        training().placed(
            affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [POD_TERM]}}
        ),
        {"unmodellable-placement"},
    ),
    (
        "inference pod with required pod affinity, which its type allows",
        inference().placed(
            affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [POD_TERM]}}
        ),
        set(),
    ),
    (
        "training pod with a strict topology spread",
        training().placed(topologySpreadConstraints=spread("DoNotSchedule")),
        {"unmodellable-placement"},
    ),
    (
        "training pod with a lenient topology spread",
        training().placed(topologySpreadConstraints=spread("ScheduleAnyway")),
        set(),
    ),
    # an admitted pod keeps its workload type
    (
        "training pod relabelled as inference",
        training().typed("inference").updated_from(training()),
        {"pod-relabel"},
    ),
    (
        "training pod given a label of its own",
        training().label("team.example/run", "7").updated_from(training()),
        set(),
    ),
]
