"""Health remediation on the real control plane (kwok nodes of the test's own pool), the real
OPA and a real Prometheus backfilled with dcgm-exporter series."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from controller.errors import InjectedFault
from controller.observe.kube import pod_path
from controller.remediation import states
from controller.remediation.settings import GANG_ANNOTATION
from fleet import labels as keys
from tests.controller.remediation.lab import STEP, T0, HealthLab, normal

pytestmark = pytest.mark.integration


@dataclass
class Kill:
    """Kills the pass (raises) after the chosen writes, counted over the whole test."""

    at: set[int]
    writes: int = 0
    names: list[str] = field(default_factory=list)

    def __call__(self, name: str) -> None:
        self.writes += 1
        self.names.append(name)
        if self.writes in self.at:
            raise InjectedFault(f"killed after write {self.writes} ({name})")


def test_uncorrectable_ecc_goes_through_every_state_and_back(
    lab_factory: Callable[..., HealthLab],
) -> None:
    def shape(node: str, gpu: int, at: float) -> dict[str, float]:
        if node.endswith("-2"):
            return {}  # exports nothing: unknown, and nothing may happen to it
        values = normal(node, gpu, at)
        if node.endswith("-0") and gpu == 3 and at >= T0 - 300:
            values["DCGM_FI_DEV_XID_ERRORS"] = 48.0
            values["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"] = 2.0
        return values

    lab = lab_factory(shape, nodes=3)
    bad, _peer, silent = lab.names
    checkpoint = {keys.LAST_CHECKPOINT: str(T0 - 60), GANG_ANNOTATION: "gang-1"}
    lab.gpu_pod("gang-a", 0, annotations=checkpoint)
    lab.gpu_pod("gang-b", 1, annotations=checkpoint)
    lab.gpu_pod("solo", 0)  # never checkpoints: waits for the checkpoint window
    lab.wait_running(3)

    kill = Kill(at={3, 9, 14})
    seen: list[str | None] = []
    gone_together: list[set[str]] = []
    for index in range(40):
        now = T0 + index * STEP
        before = lab.pods()
        lab.run_pass(now, after_write=kill)
        lab.operator_turn()
        after = lab.pods()
        if before - after:
            gone_together.append(before - after)
        state = lab.states()
        assert state[silent] is None and not lab.nodes()[silent].view.unschedulable
        if (seen or state[bad] is not None) and (not seen or seen[-1] != state[bad]):
            seen.append(state[bad])
        if state[bad] is None and len(seen) > 1:
            break
    assert seen == [
        states.QUARANTINED,
        states.DRAINING,
        states.REMEDIATING,
        states.VALIDATING,
        None,
    ], (
        seen,
        [
            line
            for line in lab.logs.getvalue().splitlines()
            if "health." in line and "observe" not in line
        ][-8:],
    )
    assert kill.writes >= 14, "the kills happened"
    # The checkpointed gang left together, the unchecked pod only after its window.
    assert {"gang-a", "gang-b"} in gone_together
    assert gone_together.index({"gang-a", "gang-b"}) < gone_together.index({"solo"})
    assert lab.remediated == [f"{bad}:gpu-reset"]
    assert lab.validated and all(v.endswith(":0") for v in lab.validated)
    node = lab.nodes()[bad]
    assert not node.view.unschedulable and not node.tainted
    assert node.condition(states.CONDITION_TYPE)["status"] == "True"
    cost = node.detail.history[-1]
    assert cost["fault"] == "uncorrectable-ecc" and cost["remedy"] == "gpu-reset"
    assert cost["gpu_hours_out_of_service"] > 0
    # gang-a: 4 GPUs x (evicted at T0+240) - (checkpoint at T0-60) = 300 s; solo's whole run.
    assert cost["gpu_hours_of_work_lost"] > 4 * 300 / 3600
    events = lab.events(bad)
    for reason in (
        "GpuQuarantined",
        "GpuDraining",
        "GpuRemediationRequested",
        "GpuValidating",
        "GpuBackInService",
    ):
        assert reason in events, events
    # Back in service, the old Xid and counters are history: a later pass changes nothing.
    lab.run_pass(T0 + 40 * STEP)
    assert lab.states()[bad] is None


def test_hot_node_is_cordoned_and_uncordoned_with_hysteresis(
    lab_factory: Callable[..., HealthLab],
) -> None:
    def shape(node: str, gpu: int, at: float) -> dict[str, float]:
        values = normal(node, gpu, at)
        if node.endswith("-0") and gpu == 0:
            values["DCGM_FI_DEV_GPU_TEMP"] = (
                92.0 if at < T0 + 600 else 80.0 if at < T0 + 1200 else 60.0
            )
        return values

    lab = lab_factory(shape, nodes=2)
    hot = lab.names[0]
    timeline = {}
    for now in (T0, T0 + 300, T0 + 900, T0 + 1500):
        lab.run_pass(now)
        timeline[now - T0] = (lab.states()[hot], lab.nodes()[hot].view.unschedulable)
    assert timeline == {
        0: (states.HOT, True),
        300: (states.HOT, True),
        900: (states.HOT, True),  # 80 C: under the hot line, not under the cool line
        1500: (None, False),
    }
    assert lab.states()[lab.names[1]] is None
    assert [e for e in lab.events(hot) if e.startswith("Gpu")] == ["GpuTooHot", "GpuBackInService"]


def test_a_storm_across_a_pool_stops_at_the_throttle(lab_factory: Callable[..., HealthLab]) -> None:
    def shape(node: str, gpu: int, at: float) -> dict[str, float]:
        values = normal(node, gpu, at)
        if gpu == 0 and at >= T0 - 300:
            values["DCGM_FI_DEV_XID_ERRORS"] = 79.0
        return values

    lab = lab_factory(shape, nodes=4, max_unavailable="25%")
    for index in range(3):
        lab.run_pass(T0 + index * STEP)
        out = {n: s for n, s in lab.states().items() if s is not None}
        assert len(out) == 1, out
        assert sum(node.view.unschedulable for node in lab.nodes().values()) == 1
    assert list(out) == [lab.names[0]]


def test_dry_run_writes_nothing(lab_factory: Callable[..., HealthLab]) -> None:
    def shape(node: str, gpu: int, at: float) -> dict[str, float]:
        values = normal(node, gpu, at)
        if gpu == 0:
            values["DCGM_FI_DEV_ROW_REMAP_FAILURE"] = 1.0
        return values

    lab = lab_factory(shape, nodes=1)
    lab.run_pass(T0, dry_run=True)
    assert lab.states() == {lab.names[0]: None}
    assert "DRY-RUN health: would cordon" in lab.last_out
    assert not [e for e in lab.events(lab.names[0]) if e.startswith("Gpu")]
    lab.run_pass(T0)
    assert lab.states() == {lab.names[0]: states.QUARANTINED}
    assert lab.client.list(pod_path(lab.namespace)) == []
