"""Rolling upgrades on the real control plane (kwok nodes of the test's own pool) with the real
OPA, the test playing the GPU Operator, feature discovery and the validator's node."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from controller.observe.kube import object_path
from controller.upgrade import states
from controller.upgrade.limits import resolve_max_unavailable
from controller.upgrade.rollout import upgrade_status
from tests.commands import fleetplane
from tests.controller.upgrade.lab import (
    NEW,
    OLD,
    SATURDAY,
    STEP,
    WAIT_FOR_JOBS,
    WEDNESDAY_NOON,
    Lab,
    Observation,
    Watch,
    double_bit_errors,
)

pytestmark = pytest.mark.integration


def drive(
    lab: Lab,
    *,
    start: float = SATURDAY,
    passes: int = 60,
    watch: Watch | None = None,
    until: Callable[[Observation], bool] | None = None,
    between: Callable[[Observation], None] | None = None,
) -> list[Observation]:
    """Passes (each followed by the operator's turn, then `between`) until every node is done,
    or `until`; the pool's limit is checked after every one."""
    seen: list[Observation] = []
    limit = resolve_max_unavailable(lab.max_unavailable, len(lab.names))
    assert limit is not None
    for index in range(passes):
        now = start + index * STEP
        result = lab.run_pass(now, watch=watch)
        lab.operator_turn(now)
        observed = lab.observe(now)
        if result is not None:
            observed.refused = list(result.acted.refused_evictions)
        seen.append(observed)
        if between is not None:
            between(observed)
        assert len(observed.unavailable) <= limit, (
            f"pass {index}: {sorted(observed.unavailable)} unavailable, max {limit}"
        )
        finished = (
            all(s == states.UPGRADE_DONE for s in observed.states.values())
            and not observed.unavailable
        )
        if (until and until(observed)) or (until is None and finished):
            return seen
    raise AssertionError(f"not finished after {passes} passes: {seen[-1].states}")


def first(seen: list[Observation], node: str, state: str) -> Observation:
    return next(o for o in seen if o.states[node] == state)


def test_pool_rolls_to_the_new_driver_within_its_limit(lab_factory: Callable[..., Lab]) -> None:
    lab = lab_factory(nodes=4, max_unavailable=2)
    a, b, c, d = lab.names
    # A service with two replicas on the first two nodes and a budget of one disruption.
    lab.create(
        lab.namespace,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "serve"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "serve"}}},
        },
    )
    lab.create(lab.namespace, serve_deployment(lab))
    # A replica whose budget allows no disruption until its owner relaxes it.
    lab.create(
        lab.namespace,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "db"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
        },
    )
    lab.gpu_pod("db-0", 1, gpus=2, labels={"app": "db", "checkpoints": "true"})
    lab.gpu_pod("train-ckpt", 2, gpus=4, labels={"checkpoints": "true"})
    lab.gpu_pod("smi-all", 2, env={"NVIDIA_VISIBLE_DEVICES": "all"})  # no GPU request
    lab.gpu_pod("train-long", 3, gpus=4)
    lab.wait_running(6)
    lab.roll_in(NEW)

    refusals: list[str] = []
    blocks: list[str] = []

    def owner(observed: Observation) -> None:
        refusals.extend(observed.refused)
        if len(refusals) >= 2 and not blocks:
            # The status explains the wait; then the owner lets the database move.
            report = upgrade_status(lab.client, lab.upgrade, now=observed.now)
            blocks.extend(report.pools[lab.pool].blocks)
            lab.client.delete(object_path("policy/v1", "poddisruptionbudgets", lab.namespace, "db"))

    watch = Watch(lab=lab)
    seen = drive(lab, watch=watch, between=owner)

    final = seen[-1]
    assert set(final.drivers.values()) == {NEW}
    assert lab.driver_restarts() == dict.fromkeys(lab.names, 1)
    assert {node: codes[-1] for node, codes in lab.validated.items()} == dict.fromkeys(lab.names, 0)
    # The budget held at every observed moment.
    assert all(o.serve_ready >= 1 for o in seen)
    # The database waited for its budget: refused (429) and retried on later passes, never
    # evicted while its budget said no; the status named the budget.
    assert len(refusals) >= 2
    assert all(r.startswith(f"{lab.namespace}/db-0 on {b}") for r in refusals), refusals
    assert any(f"PodDisruptionBudget {lab.namespace}/db" in block for block in blocks), blocks
    # The checkpointing job left before the timeout, while the node still waited for smi-all.
    waited_since = first(seen, c, states.WAIT_FOR_JOBS_REQUIRED).since[c]
    assert waited_since is not None
    ckpt_gone = next(o for o in seen if "train-ckpt" not in o.pods)
    assert ckpt_gone.now < waited_since + WAIT_FOR_JOBS
    assert ckpt_gone.states[c] == states.WAIT_FOR_JOBS_REQUIRED
    smi_gone = next(o for o in seen if "smi-all" not in o.pods)
    assert smi_gone.now >= waited_since + WAIT_FOR_JOBS
    long_waited = first(seen, d, states.WAIT_FOR_JOBS_REQUIRED)
    long_gone = next(o for o in seen if "train-long" not in o.pods)
    assert long_gone.now >= (long_waited.since[d] or 0) + WAIT_FOR_JOBS
    # Events tell each node's story.
    reasons = lab.events(a)
    for reason in (
        "DriverUpgradeRequired",
        "DriverUpgradeStarted",
        "DriverUpgradeValidated",
        "DriverUpgradeDone",
    ):
        assert reason in reasons, reasons


def serve_deployment(lab: Lab) -> dict[str, object]:
    first_two = lab.names[:2]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "serve"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "serve"}},
            "template": {
                "metadata": {"labels": {"app": "serve"}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "tolerations": lab.toleration(),
                    "nodeSelector": {"fleetplane.dev/pool": lab.pool},
                    "affinity": {
                        "nodeAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 100,
                                    "preference": {
                                        "matchExpressions": [
                                            {
                                                "key": "kubernetes.io/hostname",
                                                "operator": "In",
                                                "values": first_two,
                                            }
                                        ]
                                    },
                                }
                            ]
                        }
                    },
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": "kubernetes.io/hostname",
                            "whenUnsatisfiable": "DoNotSchedule",
                            "labelSelector": {"matchLabels": {"app": "serve"}},
                        }
                    ],
                    "containers": [
                        {
                            "name": "main",
                            "image": "nvcr.io/nvidia/tritonserver:24.05-py3",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                },
            },
        },
    }


def test_a_failed_validation_halts_the_pool_until_cleared(
    lab_factory: Callable[..., Lab], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lab = lab_factory(nodes=3, max_unavailable=1, scenarios={0: double_bit_errors})
    bad, other, third = lab.names
    lab.roll_in(NEW)
    seen = drive(lab, until=lambda o: o.states[bad] == states.UPGRADE_FAILED)
    # Two more passes: nothing else moves.
    for extra in range(1, 3):
        now = seen[-1].now + STEP * extra
        lab.run_pass(now)
        lab.operator_turn(now)
    observed = lab.observe(now)
    assert observed.states == {
        bad: states.UPGRADE_FAILED,
        other: states.UPGRADE_REQUIRED,
        third: states.UPGRADE_REQUIRED,
    }
    assert observed.unavailable == {bad}  # kept cordoned
    assert observed.drivers == {bad: NEW, other: OLD, third: OLD}
    assert lab.driver_restarts() == {bad: 1, other: 0, third: 0}
    assert lab.validated == {bad: [1]}
    assert "DriverUpgradeFailed" in lab.events(bad)
    # Status says why, as text and as JSON.
    report = upgrade_status(lab.client, lab.upgrade, now=now).pools[lab.pool]
    assert report.halted and bad in report.failed
    assert "ecc_dbe" in report.failed[bad]
    assert report.blocks[0].startswith(f"halted: node(s) {bad} failed")
    args = lab.cli_args(tmp_path, now)
    assert fleetplane(*["controller", "upgrade", "status", *args]) == 0
    text = capsys.readouterr().out
    assert f"pool {lab.pool}: target driver {NEW}, 3 node(s), HALTED" in text
    assert f"{bad}: validation failed: GPU 3: ecc_dbe" in text
    assert "upgrade-failed 1, upgrade-required 2" in text
    assert fleetplane(*["controller", "upgrade", "status", "--json", *args]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["pools"][0]["halted"] is True
    # Clearing is the operator's explicit action; a node that is not failed cannot be cleared.
    assert fleetplane(*["controller", "upgrade", "clear", other, *args]) == 1
    assert "is not failed" in capsys.readouterr().err
    assert fleetplane(*["controller", "upgrade", "clear", bad, "--dry-run", *args]) == 0
    assert lab.observe(now).states[bad] == states.UPGRADE_FAILED
    # The operator replaces the GPU and clears the node: it must validate again before it is done.
    lab.scenarios.pop(bad)
    assert fleetplane(*["controller", "upgrade", "clear", bad, *args]) == 0
    assert "validating the node again" in capsys.readouterr().out
    assert "DriverUpgradeFailureCleared" in lab.events(bad)
    assert lab.observe(now).states[bad] == states.VALIDATION_REQUIRED
    assert (
        fleetplane(
            *["controller", "upgrade", "run", "--dry-run", *lab.cli_args(tmp_path, now + STEP)]
        )
        == 0
    )
    assert f"would create-validator {bad}" in capsys.readouterr().out
    seen = drive(lab, start=now + STEP, until=lambda o: o.states[other] == states.CORDON_REQUIRED)
    done = first(seen, bad, states.UPGRADE_DONE)
    assert bad not in done.unavailable or done.states[other] == states.CORDON_REQUIRED
    assert lab.validated[bad] == [1, 0]
    assert lab.driver_restarts()[bad] == 1


def test_a_killed_controller_resumes_and_finishes(lab_factory: Callable[..., Lab]) -> None:
    lab = lab_factory(nodes=2, max_unavailable=2)
    lab.gpu_pod("train-0", 0, gpus=8, labels={"checkpoints": "true"})
    lab.gpu_pod("train-1", 1, gpus=8, labels={"checkpoints": "true"})
    lab.wait_running(2)
    lab.roll_in(NEW)
    # Kill the run after every odd-numbered write: each pass dies after at most two writes,
    # so the controller is interrupted between every two consecutive writes of the rollout
    # (an action and its state label included), and the next pass resumes.
    watch = Watch(lab=lab, kill_at=set(range(1, 1000, 2)))
    drive(lab, watch=watch, passes=120)
    assert watch.kills >= len(watch.names) // 2  # every other write ended a run
    assert watch.names.count("upgrade.restart-driver") == 2  # once per node, never again
    assert lab.driver_restarts() == dict.fromkeys(lab.names, 1)
    observed = lab.observe(0)
    assert set(observed.drivers.values()) == {NEW}
    assert not observed.unavailable
    assert {"train-0", "train-1"}.isdisjoint(observed.pods)


def test_outside_the_maintenance_window_nothing_moves(lab_factory: Callable[..., Lab]) -> None:
    lab = lab_factory(nodes=2, max_unavailable=1)
    lab.roll_in(NEW)
    watch = Watch(lab=lab)
    for index in range(3):
        result = lab.run_pass(WEDNESDAY_NOON + index * STEP, watch=watch)
        assert result is not None and result.ok
    assert watch.writes == 0
    observed = lab.observe(WEDNESDAY_NOON)
    assert observed.states == dict.fromkeys(lab.names)
    assert not observed.unavailable
    assert result is not None and result.plan is not None
    assert result.plan.pools[lab.pool].blocks == []  # nothing marked, so nothing waits yet
    # A node already in the rollout finishes outside the window.
    lab.client.merge_patch(
        f"/api/v1/nodes/{lab.names[0]}",
        {"metadata": {"labels": {states.STATE_LABEL: states.UPGRADE_REQUIRED}}},
    )
    result = lab.run_pass(WEDNESDAY_NOON + 10 * STEP, watch=watch)
    assert result is not None and result.plan is not None
    assert watch.writes == 0
    assert result.plan.pools[lab.pool].blocks[0].startswith("maintenance window closed")


def test_dry_run_shows_the_next_steps_and_changes_nothing(
    lab_factory: Callable[..., Lab],
) -> None:
    lab = lab_factory(nodes=2, max_unavailable=1)
    lab.roll_in(NEW)
    lab.run_pass(SATURDAY)  # marks both nodes
    watch = Watch(lab=lab)
    result = lab.run_pass(SATURDAY + STEP, watch=watch, dry_run=True)
    assert result is not None and watch.writes == 0
    assert (
        f"DRY-RUN upgrade: would set-state {lab.names[0]}: upgrade-required -> cordon-required"
        in lab.last_out
    )
    assert lab.names[1] not in lab.last_out.split("would set-state")[-1]  # the limit holds
    assert lab.observe(0).states == dict.fromkeys(lab.names, states.UPGRADE_REQUIRED)
