"""Unit tests of decide.idle: verdicts per pod and the plan per workload (pure, no servers)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from controller.decide.idle import EvidenceRules, Verdict, judge_pod, plan_idle
from controller.observe.metrics import PodEvidence
from tests.controller.builders import (
    NOW,
    PodBuilder,
    a_pod,
    assert_same,
    evidence,
    fleet,
    gpu_series,
)

RULES = EvidenceRules(scrape_interval_seconds=15, min_sample_coverage=0.95, fb_steady_mib=256)
WINDOW = 1800  # notebook window in builders.config_document
FULL = RULES.expected_samples(WINDOW)


def notebook(name: str = "nb") -> PodBuilder:
    return a_pod(name).type("notebook").gpus(1).on("h100-0").of_deployment(name)


@dataclass(frozen=True)
class Case:
    name: str
    pod: PodBuilder
    evidence: PodEvidence | None
    want: Verdict
    want_reason: str = ""


CASES = [
    Case(
        "idle, never warned: warn",
        notebook(),
        evidence(WINDOW, gpu_series("h100-0", samples=FULL)),
        Verdict.WARN,
    ),
    Case(
        "idle, warned inside the window, deadline passed: reclaim",
        notebook().warned(NOW - 1000, NOW - 100),
        evidence(WINDOW, gpu_series("h100-0", samples=FULL)),
        Verdict.RECLAIM,
    ),
    Case(
        "idle, warned, deadline ahead: wait",
        notebook().warned(NOW - 100, NOW + 800),
        evidence(WINDOW, gpu_series("h100-0", samples=FULL)),
        Verdict.WAITING,
    ),
    Case(
        "idle, warning older than the window: warn again",
        notebook().warned(NOW - 5000, NOW - 4100),
        evidence(WINDOW, gpu_series("h100-0", samples=FULL)),
        Verdict.WARN,
        "outside the window",
    ),
    Case(
        "busy by utilisation",
        notebook(),
        evidence(WINDOW, gpu_series("h100-0", samples=FULL, util=40)),
        Verdict.BUSY,
        "utilisation",
    ),
    Case(
        "busy by engine activity although utilisation reads 0",
        notebook(),
        evidence(WINDOW, gpu_series("h100-0", samples=FULL, engine=0.3)),
        Verdict.BUSY,
        "engine",
    ),
    Case(
        "loading data: 0% utilisation but memory moving",
        notebook(),
        evidence(WINDOW, gpu_series("h100-0", samples=FULL, fb=30000, fb_min=1000)),
        Verdict.BUSY,
        "memory",
    ),
    Case(
        "holding a model: memory in use but steady and no compute is idle",
        notebook(),
        evidence(WINDOW, gpu_series("h100-0", samples=FULL, fb=70000)),
        Verdict.WARN,
    ),
    Case(
        "busy by utilisation although the evidence is partial",
        notebook().gpus(2),
        evidence(WINDOW, gpu_series("h100-0", samples=FULL // 2, util=70)),
        Verdict.BUSY,
        "utilisation reached 70%",
    ),
    Case(
        "utilisation above the line on another node proves nothing",
        notebook(),
        evidence(WINDOW, gpu_series("h100-7", samples=FULL, util=70)),
        Verdict.NO_EVIDENCE,
        "0 of the pod's 1 GPUs",
    ),
    Case(
        "only the peak utilisation read, under the line: not idle on that alone",
        notebook(),
        replace(evidence(WINDOW, gpu_series("h100-0", samples=0)), detailed=False),
        Verdict.NO_EVIDENCE,
        "only the peak utilisation",
    ),
    Case(
        "only the peak utilisation read, above the line: busy",
        notebook(),
        replace(evidence(WINDOW, gpu_series("h100-0", samples=0, util=30)), detailed=False),
        Verdict.BUSY,
        "utilisation",
    ),
    Case("no series", notebook(), None, Verdict.NO_EVIDENCE, "no DCGM series"),
    Case(
        "partial series",
        notebook(),
        evidence(WINDOW, gpu_series("h100-0", samples=FULL // 2)),
        Verdict.NO_EVIDENCE,
        "partial",
    ),
    Case(
        "series of one GPU for a two-GPU pod",
        notebook().gpus(2),
        evidence(WINDOW, gpu_series("h100-0", samples=FULL)),
        Verdict.NO_EVIDENCE,
        "1 of the pod's 2 GPUs",
    ),
    Case(
        "series from another node are ignored",
        notebook(),
        evidence(WINDOW, gpu_series("h100-7", samples=FULL)),
        Verdict.NO_EVIDENCE,
    ),
    Case(
        "younger than the window",
        a_pod("young").type("notebook").gpus(1).on("h100-0", started=NOW - 60),
        evidence(WINDOW, gpu_series("h100-0", samples=FULL)),
        Verdict.NO_EVIDENCE,
        "less than the",
    ),
    Case(
        "exempt label",
        notebook().exempt(),
        evidence(WINDOW, gpu_series("h100-0", samples=FULL)),
        Verdict.EXEMPT,
    ),
    Case(
        "inference has no idle rule",
        a_pod("srv").type("inference").gpus(1).on("h100-0"),
        evidence(3600, gpu_series("h100-0", samples=240)),
        Verdict.NOT_RECLAIMABLE,
    ),
    Case("no workload type", a_pod("x").gpus(1).on("h100-0"), None, Verdict.NOT_RECLAIMABLE),
    Case(
        "pending", a_pod("p").type("notebook").gpus(1).pending(NOW - 10), None, Verdict.NOT_RUNNING
    ),
    Case(
        "terminating",
        notebook().deleting(),
        evidence(WINDOW, gpu_series("h100-0", samples=FULL)),
        Verdict.NOT_RUNNING,
    ),
    Case(
        "TPU pods have no DCGM evidence",
        a_pod("jax").type("training").tpus(4).on("tpu-0"),
        None,
        Verdict.NO_EVIDENCE,
        "not a GPU",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_judge_pod(case: Case) -> None:
    got = judge_pod(case.pod.build(), fleet(), case.evidence, NOW, RULES)
    assert_same(case.want, got.verdict, f"verdict ({got.reason})")
    assert case.want_reason in got.reason


def test_expected_samples_allow_a_missed_scrape() -> None:
    assert RULES.expected_samples(1800) == 114  # 120 scrapes at 15 s, 95 % coverage


def test_plan_groups_by_workload_and_needs_every_replica_idle() -> None:
    def ready(name: str, rs: str) -> PodBuilder:
        return (
            a_pod(name)
            .type("notebook")
            .gpus(1)
            .on("h100-0")
            .of_deployment(rs)
            .warned(NOW - 1000, NOW - 100)
        )

    pods = [
        ready("solo-1", "solo").build(),
        ready("pair-1", "pair").build(),
        a_pod("pair-2").type("notebook").gpus(1).on("h100-0").of_deployment("pair").build(),
        ready("bare", "x").build(),
        a_pod("job-1")
        .type("batch")
        .gpus(1)
        .on("h100-0")
        .owned_by("Job", "train", "batch/v1")
        .warned(NOW - 1000, NOW - 100)
        .build(),
        a_pod("vc-1")
        .type("batch")
        .gpus(1)
        .on("h100-0")
        .owned_by("Job", "sweep", "batch.volcano.sh/v1alpha1")
        .warned(NOW - 1000, NOW - 100)
        .build(),
    ]
    # The bare pod has no owner.
    bare = pods[3]
    pods[3] = type(bare)(**{**{f: getattr(bare, f) for f in bare.__slots__}, "owner": None})
    idle = {
        ("ml-research", p.name): evidence(
            1800 if p.workload_type == "notebook" else 3600,
            gpu_series(
                "h100-0",
                samples=RULES.expected_samples(1800 if p.workload_type == "notebook" else 3600),
            ),
        )
        for p in pods
    }
    busy = evidence(1800, gpu_series("h100-0", samples=FULL, util=90))
    idle[("ml-research", "pair-2")] = busy
    by_window: dict[int, dict[tuple[str, str], PodEvidence]] = {}
    for key, found in idle.items():
        by_window.setdefault(found.window_seconds, {})[key] = found
    plan = plan_idle(pods, fleet(), by_window, NOW, RULES)
    got = sorted(
        (r.target.kind, r.target.name, r.target.method, r.target.via) for r in plan.reclaim
    )
    want = sorted(
        [
            ("Deployment", "solo", "scale-to-zero", "solo-5d8f7c"),
            ("Pod", "bare", "delete", None),
            ("Job", "train", "suspend", None),
            ("VolcanoJob", "sweep", "abort", None),
        ]
    )
    assert_same(want, got, "reclaim targets")
    assert_same([("Deployment", "pair")], [(t.kind, t.name) for t, _ in plan.held], "held")
    assert [j.pod.name for j in plan.clear] == []


def idle_evidence(*names: str) -> dict[int, dict[tuple[str, str], PodEvidence]]:
    return {
        WINDOW: {
            ("ml-research", name): evidence(WINDOW, gpu_series("h100-0", samples=FULL))
            for name in names
        }
    }


def reclaimable(name: str, owner: str) -> PodBuilder:
    return (
        a_pod(name)
        .type("notebook")
        .gpus(1)
        .on("h100-0")
        .of_deployment(owner)
        .warned(NOW - 1000, NOW - 100)
    )


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(
            a_pod("nb-b").type("notebook").gpus(1).of_deployment("nb").pending(NOW - 60),
            id="pending replica",
        ),
        pytest.param(
            a_pod("nb-b").type("notebook").gpus(1).on("h100-0").of_deployment("nb").deleting(),
            id="terminating replica",
        ),
        pytest.param(
            a_pod("nb-b").type("notebook").gpus(1).of_deployment("nb", "77aa11").pending(NOW - 5),
            id="pending replica of a new rollout",
        ),
    ],
)
def test_a_workload_with_a_pod_not_judged_idle_is_held(other: PodBuilder) -> None:
    """One replica idle past its grace, another not running: the Deployment is not scaled to
    zero on the evidence of the first alone."""
    pods = [reclaimable("nb-a", "nb").build(), other.build()]
    plan = plan_idle(pods, fleet(), idle_evidence("nb-a"), NOW, RULES)
    assert_same([], [r.target.key for r in plan.reclaim], "reclaimed")
    [(target, reason)] = plan.held
    assert target.key == "Deployment/ml-research/nb"
    assert "workload has pods that were not judged idle: ml-research/nb-b" in reason


def test_finished_pods_do_not_hold_a_workload() -> None:
    pods = [
        a_pod("train-0")
        .type("batch")
        .gpus(1)
        .on("h100-0")
        .owned_by("Job", "train", "batch/v1")
        .warned(NOW - 1000, NOW - 100)
        .build(),
        a_pod("train-1")
        .type("batch")
        .gpus(1)
        .owned_by("Job", "train", "batch/v1")
        .finished(NOW - 500)
        .build(),
    ]
    found = {
        3600: {
            ("ml-research", "train-0"): evidence(
                3600, gpu_series("h100-0", samples=RULES.expected_samples(3600))
            )
        }
    }
    plan = plan_idle(pods, fleet(), found, NOW, RULES)
    assert_same(["Job/ml-research/train"], [r.target.key for r in plan.reclaim], "reclaimed")
    assert plan.held == []


def test_a_gang_is_idle_only_when_all_its_pods_are() -> None:
    """Two workloads in one Volcano PodGroup (a gang): the idle one is held while its mate is
    busy, and both are reclaimed once both are idle."""
    gang = "scheduling.k8s.io/group-name"
    idle_one = reclaimable("ps-0", "ps").annotate(gang, "pg-train").build()
    busy_mate = reclaimable("worker-0", "worker").annotate(gang, "pg-train").build()
    plan = plan_idle([idle_one, busy_mate], fleet(), idle_evidence("ps-0"), NOW, RULES)
    assert_same([], [r.target.key for r in plan.reclaim], "reclaimed")
    assert any(
        target.key == "Deployment/ml-research/ps" and "its gang (PodGroup pg-train)" in reason
        for target, reason in plan.held
    )
    both = plan_idle([idle_one, busy_mate], fleet(), idle_evidence("ps-0", "worker-0"), NOW, RULES)
    assert_same(
        ["Deployment/ml-research/ps", "Deployment/ml-research/worker"],
        sorted(r.target.key for r in both.reclaim),
    )
