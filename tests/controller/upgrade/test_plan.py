"""The state machine, one handler per state, and the pool-level rules (limit, order, halt,
window), on snapshots built from fixtures. Pure: no cluster."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.observe.model import DisruptionBudget
from controller.upgrade import states
from controller.upgrade.handlers import clear_step
from controller.upgrade.observe import UpgradeSnapshot
from controller.upgrade.plan import CURRENT, Plan, plan_pass
from controller.upgrade.settings import PoolTarget, UpgradeSettings
from controller.upgrade.steps import (
    Cordon,
    CreateValidator,
    DeleteValidator,
    Evict,
    RestartDriver,
    Step,
    Uncordon,
)
from tests.controller.upgrade.builders import (
    ALWAYS,
    NEW,
    OLD,
    POOL,
    SATURDAY_NOON,
    SETTINGS,
    WEDNESDAY_NOON,
    NodeBuilder,
    PodBuilder,
    driver_pod,
    node,
    pod,
    settings,
    validator,
    verdict,
)

NOW = SATURDAY_NOON
T0 = NOW - 300  # when the node entered its state, unless a case says otherwise


def plan_of(
    nodes: list[NodeBuilder],
    pods: list[PodBuilder] = (),  # type: ignore[assignment]
    *,
    now: float = NOW,
    upgrade: UpgradeSettings = SETTINGS,
    pdbs: list[DisruptionBudget] | None = None,
) -> Plan:
    views = [n.view() for n in nodes]
    by_node: dict[str, list[Any]] = {}
    for builder in pods:
        view = builder.view(upgrade)
        by_node.setdefault(builder.raw["spec"]["nodeName"], []).append(view)
    snapshot = UpgradeSnapshot(
        taken_at=now,
        nodes=views,
        pods={v.name: by_node.get(v.name, []) for v in views if v.state in states.NEEDS_PODS},
        pdbs=pdbs or [],
    )
    plan = plan_pass(snapshot, upgrade, now)
    for step in plan.steps:
        if step.next_state:
            assert states.allowed(step.state, step.next_state), (step.state, step.next_state)
    return plan


def only_step(plan: Plan) -> Step | None:
    assert len(plan.steps) <= 1, plan.steps
    return plan.steps[0] if plan.steps else None


@dataclass
class Case:
    name: str
    node: NodeBuilder
    pods: list[PodBuilder] = field(default_factory=list)
    want_state: str | None = None
    want_actions: list[type] = field(default_factory=list)
    want_reason: str = ""
    now: float = NOW
    want_detail: dict[str, Any] = field(default_factory=dict)
    acts: bool = True


def job(name: str, on: str = "p-0") -> PodBuilder:
    return pod(name).on(on).gpus(4)


CASES = [
    # no state / done
    Case(
        "outdated node is marked",
        node("p-0"),
        want_state=states.UPGRADE_REQUIRED,
        want_detail={"target": NEW, "previous": OLD},
    ),
    Case("outside the window nothing is marked", node("p-0"), now=WEDNESDAY_NOON, acts=False),
    Case("node at the target is left alone", node("p-0").driver(NEW), acts=False),
    Case("node without driver labels is left alone", node("p-0").driver(None), acts=False),
    Case(
        "done node with a new target is marked again",
        node("p-0").state(states.UPGRADE_DONE),
        want_state=states.UPGRADE_REQUIRED,
    ),
    Case(
        "done node at the target stays",
        node("p-0").driver(NEW).state(states.UPGRADE_DONE),
        acts=False,
    ),
    # upgrade-required
    Case(
        "admitted: leaves service",
        node("p-0").state(states.UPGRADE_REQUIRED),
        want_state=states.CORDON_REQUIRED,
        want_detail={"cordoned": True},
    ),
    Case(
        "admitted while cordoned by someone else: left cordoned at the end",
        node("p-0").state(states.UPGRADE_REQUIRED).cordoned(),
        want_state=states.CORDON_REQUIRED,
        want_detail={"cordoned": False},
    ),
    Case(
        "already at the target",
        node("p-0").driver(NEW).state(states.UPGRADE_REQUIRED),
        want_state=states.UPGRADE_DONE,
    ),
    Case(
        "NotReady is not started",
        node("p-0").state(states.UPGRADE_REQUIRED).not_ready(),
        acts=False,
    ),
    Case(
        "outside the window nothing starts",
        node("p-0").state(states.UPGRADE_REQUIRED),
        now=WEDNESDAY_NOON,
        acts=False,
    ),
    # cordon-required
    Case(
        "cordon",
        node("p-0").state(states.CORDON_REQUIRED, since=T0),
        want_state=states.WAIT_FOR_JOBS_REQUIRED,
        want_actions=[Cordon],
    ),
    Case(
        "cordon already done by an interrupted pass",
        node("p-0").state(states.CORDON_REQUIRED, since=T0).cordoned(),
        want_state=states.WAIT_FOR_JOBS_REQUIRED,
    ),
    Case(
        "in-flight nodes move outside the window too",
        node("p-0").state(states.CORDON_REQUIRED, since=T0),
        now=WEDNESDAY_NOON,
        want_state=states.WAIT_FOR_JOBS_REQUIRED,
        want_actions=[Cordon],
    ),
    # wait-for-jobs-required
    Case(
        "no GPU pod: go on",
        node("p-0").state(states.WAIT_FOR_JOBS_REQUIRED, since=T0).cordoned(),
        [
            pod("web").on("p-0"),
            pod("dcgm-exporter", "gpu-operator")
            .on("p-0")
            .owned_by("DaemonSet")
            .env("NVIDIA_VISIBLE_DEVICES", "all"),
        ],
        want_state=states.DRAIN_REQUIRED,
    ),
    Case(
        "a job is waited for",
        node("p-0").state(states.WAIT_FOR_JOBS_REQUIRED, since=T0).cordoned(),
        [job("train")],
        want_reason="1 job pod(s)",
        acts=False,
    ),
    Case(
        "a job that finished does not count",
        node("p-0").state(states.WAIT_FOR_JOBS_REQUIRED, since=T0).cordoned(),
        [job("train").phase("Succeeded", ready=False)],
        want_state=states.DRAIN_REQUIRED,
    ),
    Case(
        "a hidden GPU user is waited for too",
        node("p-0").state(states.WAIT_FOR_JOBS_REQUIRED, since=T0).cordoned(),
        [pod("smi").on("p-0").env("NVIDIA_VISIBLE_DEVICES", "all")],
        want_reason="team/smi",
        acts=False,
    ),
    Case(
        "timeout: go on and evict",
        node("p-0").state(states.WAIT_FOR_JOBS_REQUIRED, since=NOW - 1800).cordoned(),
        [job("train")],
        want_state=states.DRAIN_REQUIRED,
        want_reason="waited 1800s",
    ),
    Case(
        "a recent checkpoint is evicted before the timeout, the job is still waited for",
        node("p-0").state(states.WAIT_FOR_JOBS_REQUIRED, since=T0).cordoned(),
        [job("ckpt").checkpointed(NOW - 60), job("train")],
        want_actions=[Evict],
        want_reason="1 job pod(s)",
    ),
    Case(
        "an old checkpoint does not count",
        node("p-0").state(states.WAIT_FOR_JOBS_REQUIRED, since=T0).cordoned(),
        [job("ckpt").checkpointed(NOW - 3600)],
        acts=False,
    ),
    Case(
        "only replicas and checkpointed pods left: go on",
        node("p-0").state(states.WAIT_FOR_JOBS_REQUIRED, since=T0).cordoned(),
        [job("ckpt").checkpointed(NOW - 60), job("serve").owned_by("ReplicaSet")],
        want_state=states.DRAIN_REQUIRED,
        want_actions=[Evict, Evict],
    ),
    Case(
        "a missing timer is written",
        node("p-0").state(states.WAIT_FOR_JOBS_REQUIRED).cordoned(),
        [job("train")],
        want_reason="job pod",
    ),
    # drain-required
    Case(
        "evict what uses the GPU",
        node("p-0").state(states.DRAIN_REQUIRED, since=T0).cordoned(),
        [job("train"), pod("smi").on("p-0").privileged(), pod("web").on("p-0")],
        want_actions=[Evict, Evict],
    ),
    Case(
        "wait for evicted pods to go",
        node("p-0").state(states.DRAIN_REQUIRED, since=T0).cordoned(),
        [job("train").deleting()],
        want_reason="to terminate",
        acts=False,
    ),
    Case(
        "drained: record the driver pod to restart",
        node("p-0").state(states.DRAIN_REQUIRED, since=T0).cordoned(),
        [driver_pod("p-0", "drv-1")],
        want_state=states.DRIVER_RESTART_REQUIRED,
        want_detail={"driver_pod": "drv-1"},
    ),
    # driver-restart-required
    Case(
        "restart the recorded driver pod",
        node("p-0")
        .state(states.DRIVER_RESTART_REQUIRED, since=T0, driver_pod="drv-1", attempt=4)
        .cordoned(),
        [driver_pod("p-0", "drv-1")],
        want_state=states.VALIDATION_REQUIRED,
        want_actions=[RestartDriver],
        want_detail={"attempt": 5},
    ),
    Case(
        "restarted already by an interrupted pass: never restart the replacement",
        node("p-0").state(states.DRIVER_RESTART_REQUIRED, since=T0, driver_pod="drv-1").cordoned(),
        [driver_pod("p-0", "drv-2")],
        want_state=states.VALIDATION_REQUIRED,
        want_actions=[],
    ),
    Case(
        "no recorded driver pod: record first, restart next pass",
        node("p-0").state(states.DRIVER_RESTART_REQUIRED, since=T0).cordoned(),
        [driver_pod("p-0", "drv-1")],
        want_detail={"driver_pod": "drv-1"},
    ),
    Case(
        "a third-party DaemonSet holding the GPU blocks the restart",
        node("p-0").state(states.DRIVER_RESTART_REQUIRED, since=T0, driver_pod="drv-1").cordoned(),
        [
            driver_pod("p-0", "drv-1"),
            pod("dcgm", "monitoring")
            .on("p-0")
            .owned_by("DaemonSet")
            .env("NVIDIA_VISIBLE_DEVICES", "all"),
        ],
        want_reason="DaemonSet and static pods are never evicted",
        acts=False,
    ),
    Case(
        "a workload that arrived meanwhile blocks and is evicted",
        node("p-0").state(states.DRIVER_RESTART_REQUIRED, since=T0, driver_pod="drv-1").cordoned(),
        [driver_pod("p-0", "drv-1"), job("late")],
        want_actions=[Evict],
        want_reason="still use the GPU",
    ),
    Case(
        "GPU Operator operands do not block",
        node("p-0").state(states.DRIVER_RESTART_REQUIRED, since=T0, driver_pod="drv-1").cordoned(),
        [
            driver_pod("p-0", "drv-1"),
            pod("nvidia-device-plugin", "gpu-operator")
            .on("p-0")
            .owned_by("DaemonSet")
            .privileged(),
        ],
        want_state=states.VALIDATION_REQUIRED,
        want_actions=[RestartDriver],
    ),
    # validation-required
    Case(
        "wait for the new driver pod",
        node("p-0")
        .driver(NEW)
        .state(states.VALIDATION_REQUIRED, since=T0, driver_pod="drv-1", attempt=1)
        .cordoned(),
        [driver_pod("p-0", "drv-2", ready=False)],
        want_reason="new driver pod",
        acts=False,
    ),
    Case(
        "wait for feature discovery",
        node("p-0")
        .state(states.VALIDATION_REQUIRED, since=T0, driver_pod="drv-1", attempt=1)
        .cordoned(),
        [driver_pod("p-0", "drv-2")],
        want_reason="feature discovery",
        acts=False,
    ),
    Case(
        "start the validator",
        node("p-0")
        .driver(NEW)
        .state(states.VALIDATION_REQUIRED, since=T0, driver_pod="drv-1", attempt=1)
        .cordoned(),
        [driver_pod("p-0", "drv-2")],
        want_actions=[CreateValidator],
    ),
    Case(
        "replace a validator of an earlier attempt",
        node("p-0")
        .driver(NEW)
        .state(states.VALIDATION_REQUIRED, since=T0, driver_pod="drv-1", attempt=2)
        .cordoned(),
        [driver_pod("p-0", "drv-2"), validator("p-0", 1).terminated(0, verdict())],
        want_actions=[DeleteValidator, CreateValidator],
    ),
    Case(
        "validator still running",
        node("p-0")
        .driver(NEW)
        .state(states.VALIDATION_REQUIRED, since=T0, driver_pod="drv-1", attempt=1)
        .cordoned(),
        [driver_pod("p-0", "drv-2"), validator("p-0", 1)],
        want_reason="is Running",
        acts=False,
    ),
    Case(
        "validated",
        node("p-0")
        .driver(NEW)
        .state(states.VALIDATION_REQUIRED, since=T0, driver_pod="drv-1", attempt=1)
        .cordoned(),
        [driver_pod("p-0", "drv-2"), validator("p-0", 1).terminated(0, verdict())],
        want_state=states.UNCORDON_REQUIRED,
        want_reason="validated",
    ),
    Case(
        "healthy, but the device plugin has not advertised every GPU yet",
        node("p-0")
        .driver(NEW)
        .state(states.VALIDATION_REQUIRED, since=T0, driver_pod="drv-1", attempt=1)
        .cordoned()
        .allocatable(0),
        [driver_pod("p-0", "drv-2"), validator("p-0", 1).terminated(0, verdict())],
        want_reason="allocatable is 0 of 8",
        acts=False,
    ),
    Case(
        "unhealthy: failed",
        node("p-0")
        .driver(NEW)
        .state(states.VALIDATION_REQUIRED, since=T0, driver_pod="drv-1", attempt=1)
        .cordoned(),
        [
            driver_pod("p-0", "drv-2"),
            validator("p-0", 1).terminated(
                1,
                verdict(
                    status="unhealthy",
                    problems=[
                        {
                            "device": 3,
                            "check": "ecc_dbe",
                            "detail": "1 volatile double-bit ECC error(s)",
                        }
                    ],
                ),
            ),
        ],
        want_state=states.UPGRADE_FAILED,
        want_reason="GPU 3: ecc_dbe",
    ),
    Case(
        "could not check: try again",
        node("p-0")
        .driver(NEW)
        .state(states.VALIDATION_REQUIRED, since=T0, driver_pod="drv-1", attempt=1)
        .cordoned(),
        [
            driver_pod("p-0", "drv-2"),
            validator("p-0", 1).terminated(
                2,
                verdict(
                    status="unavailable",
                    problems=[{"device": None, "check": "nvml", "detail": "NVML unavailable"}],
                ),
            ),
        ],
        want_actions=[DeleteValidator],
        want_detail={"attempt": 2},
        want_reason="trying again",
    ),
    Case(
        "no NVIDIA driver: failed at once, in words, long before the timeout",
        node("p-0")
        .driver(NEW)
        .state(states.VALIDATION_REQUIRED, since=T0, driver_pod="drv-1", attempt=1)
        .cordoned(),
        [
            driver_pod("p-0", "drv-2"),
            validator("p-0", 1).terminated(
                2,
                verdict(
                    status="unavailable",
                    reason="no-driver",
                    driver=None,
                    problems=[
                        {
                            "device": None,
                            "check": "nvml",
                            "detail": "NVML unavailable: NVML Shared Library Not Found "
                            "(NVMLError_LibraryNotFound)",
                        }
                    ],
                ),
            ),
        ],
        want_state=states.UPGRADE_FAILED,
        want_reason="no NVIDIA driver on the node (no-driver): libnvidia-ml is not loadable",
    ),
    Case(
        "could not check until the timeout: failed",
        node("p-0")
        .driver(NEW)
        .state(states.VALIDATION_REQUIRED, since=NOW - 1200, driver_pod="drv-1", attempt=1)
        .cordoned(),
        [driver_pod("p-0", "drv-2"), validator("p-0", 1).terminated(2, "")],
        want_state=states.UPGRADE_FAILED,
        want_reason="did not finish within 1200s",
    ),
    Case(
        "the driver never came back: failed at the timeout",
        node("p-0")
        .state(states.VALIDATION_REQUIRED, since=NOW - 1200, driver_pod="drv-1", attempt=1)
        .cordoned(),
        [],
        want_state=states.UPGRADE_FAILED,
        want_reason="new driver pod",
    ),
    # uncordon-required
    Case(
        "uncordon and clean up",
        node("p-0").driver(NEW).state(states.UNCORDON_REQUIRED, since=T0, cordoned=True).cordoned(),
        [validator("p-0", 1).terminated(0, verdict())],
        want_state=states.UPGRADE_DONE,
        want_actions=[Uncordon, DeleteValidator],
        want_detail={"cordoned": False},
    ),
    Case(
        "a node cordoned by someone else stays cordoned",
        node("p-0").driver(NEW).state(states.UNCORDON_REQUIRED, since=T0).cordoned(),
        want_state=states.UPGRADE_DONE,
        want_actions=[],
    ),
    Case(
        "returned by a halt on the old driver: upgrade-required again",
        node("p-0").state(states.UNCORDON_REQUIRED, since=T0, cordoned=True).cordoned(),
        want_state=states.UPGRADE_REQUIRED,
        want_actions=[Uncordon],
    ),
    # upgrade-failed and clearing
    Case(
        "failed stays failed",
        node("p-0")
        .driver(NEW)
        .state(states.UPGRADE_FAILED, since=T0, failure={"reason": "x"})
        .cordoned(),
        acts=False,
    ),
    Case(
        "label removed from a failed node at the target: validate again",
        node("p-0")
        .driver(NEW)
        .state(None, since=T0, failure={"reason": "x"}, attempt=3)
        .cordoned(),
        want_state=states.VALIDATION_REQUIRED,
        want_detail={"attempt": 4, "failure": None},
    ),
    Case(
        "label removed from a failed node on the old driver: upgrade again",
        node("p-0").state(None, since=T0, failure={"reason": "x"}).cordoned(),
        want_state=states.CORDON_REQUIRED,
        want_detail={"failure": None},
    ),
    Case(
        "label removed from a node the rollout cordoned: validate before it takes work",
        node("p-0").driver(NEW).state(None, since=T0, cordoned=True, attempt=1).cordoned(),
        want_state=states.VALIDATION_REQUIRED,
        want_detail={"attempt": 2},
    ),
    Case("unknown state value is left alone", node("p-0").state("upgrade-paused"), acts=False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_transition(case: Case) -> None:
    plan = plan_of([case.node], case.pods, now=case.now)
    step = only_step(plan)
    if not case.acts:
        assert step is None, step
    else:
        assert step is not None
        assert step.next_state == case.want_state
        assert [type(a) for a in step.actions] == case.want_actions
        for key, want in case.want_detail.items():
            assert step.detail is not None
            assert getattr(step.detail, key) == want, key
    line = plan.pools[POOL].lines[0]
    note = step.reason if step is not None else line.note
    assert case.want_reason in note, note


@pytest.mark.parametrize(
    "written",
    [
        str(int(NOW * 1000) - 60_000),  # milliseconds, a minute ago
        str(NOW + 3600),  # an hour ahead of our clock
        "inf",
        "-inf",
        "nan",
        "0",
        "-60",
        "yesterday",
    ],
)
def test_a_malformed_or_future_checkpoint_is_no_checkpoint(written: str) -> None:
    """Such an annotation once made the age hugely negative, so the job counted as just
    checkpointed and was evicted at once; now the job is waited for like any other."""
    plan = plan_of(
        [node("p-0").state(states.WAIT_FOR_JOBS_REQUIRED, since=T0).cordoned()],
        [job("ckpt").checkpointed(written)],
    )
    assert only_step(plan) is None
    assert "1 job pod(s)" in plan.pools[POOL].lines[0].note


def test_a_checkpoint_taken_now_still_counts() -> None:
    plan = plan_of(
        [node("p-0").state(states.WAIT_FOR_JOBS_REQUIRED, since=T0).cordoned()],
        [job("ckpt").checkpointed(NOW)],
    )
    step = only_step(plan)
    assert step is not None
    assert [type(a) for a in step.actions] == [Evict]
    assert "checkpointed 0s ago" in step.actions[0].why  # type: ignore[union-attr]


def test_the_snapshot_logs_a_malformed_checkpoint() -> None:
    from controller.upgrade.observe import take_upgrade_snapshot

    nodes = [node("p-0").state(states.WAIT_FOR_JOBS_REQUIRED, since=T0).cordoned().raw]
    pods = [job("ok").checkpointed(NOW - 60).raw, job("ms").checkpointed("1790000000000").raw]

    class Kube:
        def list(self, path: str, params: dict[str, str] | None = None) -> list[dict[str, Any]]:
            if path == "/api/v1/nodes":
                return nodes
            return pods if path == "/api/v1/pods" else []

    class Recorder:
        def __init__(self) -> None:
            self.warnings: list[tuple[str, dict[str, Any]]] = []

        def info(self, event: str, **fields: Any) -> None:
            pass

        def warning(self, event: str, **fields: Any) -> None:
            self.warnings.append((event, fields))

    log = Recorder()
    take_upgrade_snapshot(Kube(), SETTINGS, log=log)  # type: ignore[arg-type]
    assert [(e, f["pod"], f["value"]) for e, f in log.warnings] == [
        ("upgrade.checkpoint.malformed", "team/ms", "1790000000000")
    ]
    assert "in the future" in log.warnings[0][1]["problem"]


def test_every_state_has_a_handler_or_is_terminal() -> None:
    from controller.upgrade.handlers import HANDLERS

    assert set(HANDLERS) | {states.UPGRADE_FAILED} == {"", *states.STATES}


# --- pool-level rules --------------------------------------------------------------------------


def pool_of(count: int, state: str | None = states.UPGRADE_REQUIRED) -> list[NodeBuilder]:
    return [node(f"p-{i}").state(state) for i in range(count)]


def admitted(plan: Plan) -> list[str]:
    return [s.node.name for s in plan.steps if s.next_state == states.CORDON_REQUIRED]


def test_admissions_stop_at_max_unavailable_in_name_order() -> None:
    plan = plan_of(pool_of(12))  # max_unavailable 2
    assert admitted(plan) == ["p-0", "p-1"]
    assert [s.admission.pool_unavailable for s in plan.steps if s.admission] == [0, 1]
    assert "limit reached: 10 node(s) wait for a slot" in plan.pools[POOL].blocks[0]


def test_nodes_unavailable_for_other_reasons_count() -> None:
    nodes = [*pool_of(3), node("p-9").driver(NEW).not_ready()]
    assert admitted(plan_of(nodes)) == ["p-0"]


def test_max_parallel_bounds_admissions() -> None:
    assert admitted(plan_of(pool_of(5), upgrade=settings(max_parallel=1))) == ["p-0"]


def test_nodes_in_the_rollout_use_slots() -> None:
    nodes = [node("p-0").state(states.WAIT_FOR_JOBS_REQUIRED, since=T0).cordoned(), *pool_of(4)[1:]]
    assert admitted(plan_of(nodes)) == ["p-1"]


def test_an_already_cordoned_node_goes_first_and_takes_no_unavailability_slot() -> None:
    nodes = [*pool_of(3), node("p-7").state(states.UPGRADE_REQUIRED).cordoned()]
    plan = plan_of(nodes)
    assert admitted(plan) == ["p-7", "p-0"]
    # p-7 is unavailable already; with it, p-0 makes 2 = max_unavailable.
    assert [s.admission.pool_unavailable for s in plan.steps if s.admission] == [0, 1]


def test_percentages_round_up() -> None:
    upgrade = settings(
        pools={POOL: PoolTarget(name=POOL, driver_version=NEW, max_unavailable="10%")}
    )
    assert len(admitted(plan_of(pool_of(21), upgrade=upgrade))) == 3


def test_a_failed_node_halts_the_pool() -> None:
    nodes = [
        node("p-0")
        .driver(NEW)
        .state(states.UPGRADE_FAILED, since=T0, failure={"reason": "ecc"})
        .cordoned(),
        node("p-1").state(states.WAIT_FOR_JOBS_REQUIRED, since=T0, cordoned=True).cordoned(),
        node("p-2")
        .driver(NEW)
        .state(states.VALIDATION_REQUIRED, since=T0, driver_pod="d", attempt=1)
        .cordoned(),
        node("p-3").state(states.UPGRADE_REQUIRED),
        node("p-4"),
    ]
    plan = plan_of(
        nodes,
        [driver_pod("p-2", "d2"), job("train", "p-1")],
        upgrade=settings(
            pools={POOL: PoolTarget(name=POOL, driver_version=NEW, max_unavailable=5)}
        ),
    )
    moves = {s.node.name: (s.next_state, [type(a) for a in s.actions]) for s in plan.steps}
    assert moves == {
        "p-1": (states.UNCORDON_REQUIRED, []),  # back to service on the old driver
        "p-2": (None, [CreateValidator]),  # already on the new driver: keeps validating
    }
    report = plan.pools[POOL]
    assert report.halted and report.failed == {"p-0": "ecc"}
    assert report.blocks[0].startswith("halted: node(s) p-0 failed")


def test_a_node_failing_in_this_pass_halts_admissions_in_the_same_pass() -> None:
    nodes = [
        node("p-0")
        .driver(NEW)
        .state(states.VALIDATION_REQUIRED, since=T0, driver_pod="d", attempt=1)
        .cordoned(),
        node("p-1").state(states.UPGRADE_REQUIRED),
    ]
    pods = [driver_pod("p-0", "d2"), validator("p-0", 1).terminated(1, verdict(status="unhealthy"))]
    plan = plan_of(nodes, pods)
    assert {s.node.name: s.next_state for s in plan.steps} == {"p-0": states.UPGRADE_FAILED}


def test_window_closed_blocks_only_new_starts() -> None:
    nodes = [
        node("p-0").state(states.CORDON_REQUIRED, since=T0),
        node("p-1").state(states.UPGRADE_REQUIRED),
        node("p-2"),
    ]
    plan = plan_of(nodes, now=WEDNESDAY_NOON)
    assert {s.node.name: s.next_state for s in plan.steps} == {"p-0": states.WAIT_FOR_JOBS_REQUIRED}
    assert plan.pools[POOL].blocks == ["maintenance window closed: next opens 2026-11-21T00:00:00Z"]


def test_a_budget_that_allows_nothing_is_reported() -> None:
    pdb = DisruptionBudget(
        namespace="team",
        name="serve",
        selector={"matchLabels": {"app": "serve"}},
        disruptions_allowed=0,
    )
    nodes = [node("p-0").state(states.DRAIN_REQUIRED, since=T0).cordoned()]
    plan = plan_of(nodes, [job("serve-1").labels(app="serve").owned_by("ReplicaSet")], pdbs=[pdb])
    evict = plan.steps[0].actions[0]
    assert isinstance(evict, Evict) and evict.budget == "team/serve"
    assert "PodDisruptionBudget team/serve" in plan.pools[POOL].blocks[0]


def test_nodes_of_other_pools_and_pools_without_a_target_are_ignored() -> None:
    plan = plan_of([node("q-0", pool="q"), node("p-0")])
    assert [s.node.name for s in plan.steps] == ["p-0"]
    assert list(plan.pools) == [POOL]


def test_complete_pool() -> None:
    plan = plan_of([node("p-0").driver(NEW).state(states.UPGRADE_DONE), node("p-1").driver(NEW)])
    report = plan.pools[POOL]
    assert report.complete and not plan.steps
    assert report.states == {states.UPGRADE_DONE: 1, CURRENT: 1}


def test_clear_step() -> None:
    failed = (
        node("p-0")
        .driver(NEW)
        .state(states.UPGRADE_FAILED, since=T0, failure={"reason": "ecc"}, attempt=2)
        .cordoned()
        .view()
    )
    step = clear_step(failed, NEW, NOW, how="cli", actor="ops@host")
    assert step is not None and step.next_state == states.VALIDATION_REQUIRED
    assert step.detail is not None and step.detail.attempt == 3 and step.detail.failure is None
    assert step.detail.cleared == {
        "at": int(NOW),
        "how": "cli",
        "failure": {"reason": "ecc"},
        "by": "ops@host",
    }
    assert (
        clear_step(node("p-1").state(states.UPGRADE_DONE).view(), NEW, NOW, how="cli", actor=None)
        is None
    )


def test_always_window_fixture_is_open() -> None:
    plan = plan_of([node("p-0")], now=WEDNESDAY_NOON, upgrade=settings(windows=(ALWAYS,)))
    assert [s.next_state for s in plan.steps] == [states.UPGRADE_REQUIRED]


def test_a_halt_never_returns_a_node_whose_driver_was_already_restarted() -> None:
    """An interrupted pass deleted p-1's driver pod but did not record it: p-1 runs the new
    driver and must be validated, not returned to service."""
    nodes = [
        node("p-0")
        .driver(NEW)
        .state(states.UPGRADE_FAILED, since=T0, failure={"reason": "ecc"})
        .cordoned(),
        node("p-1")
        .state(states.DRIVER_RESTART_REQUIRED, since=T0, driver_pod="d1", cordoned=True)
        .cordoned(),
        node("p-2")
        .state(states.DRIVER_RESTART_REQUIRED, since=T0, driver_pod="d2", cordoned=True)
        .cordoned(),
    ]
    pods = [driver_pod("p-1", "d1-new"), driver_pod("p-2", "d2")]
    upgrade = settings(pools={POOL: PoolTarget(name=POOL, driver_version=NEW, max_unavailable=3)})
    moves = {
        s.node.name: (s.next_state, [type(a) for a in s.actions])
        for s in plan_of(nodes, pods, upgrade=upgrade).steps
    }
    assert moves == {
        "p-1": (states.VALIDATION_REQUIRED, []),  # restarted already: on to validation
        "p-2": (states.UNCORDON_REQUIRED, []),  # still the old driver: back to service
    }
