"""`health.recovery: act`: the controller carries out the GPU reset and the reboot itself. On the
real control plane (kwok nodes of the test's own pool), the real OPA and a real Prometheus
backfilled with dcgm-exporter series; the test plays the node's kubelet, running each remedy
pod's command with the stand-in nvidia-smi on PATH (tests/controller/health/fake_nvidia_smi.py),
and, for a reboot, the node that comes back with another boot ID."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from controller.observe.kube import object_path
from controller.remediation import states
from controller.remediation.remedy_pods import OPERAND_DEPLOY_LABELS, REMEDY_APP
from tests.controller.health.fake_nvidia_smi import calls, install, state_of
from tests.controller.remediation.lab import STEP, T0, HealthLab, normal

pytestmark = pytest.mark.integration


def xid_on_gpu3_of_node0(xid: float) -> Callable[[str, int, float], dict[str, float]]:
    def shape(node: str, gpu: int, at: float) -> dict[str, float]:
        values = normal(node, gpu, at)
        if node.endswith("-0") and gpu == 3 and at >= T0 - 300:
            values["DCGM_FI_DEV_XID_ERRORS"] = xid
        return values

    return shape


def test_a_gpu_reset_is_carried_out_cordon_drain_reset_validate_uncordon(
    lab_factory: Callable[..., HealthLab], tmp_path: Path
) -> None:
    lab = lab_factory(xid_on_gpu3_of_node0(48.0), nodes=2, recovery="act")
    bad = lab.names[0]
    log = tmp_path / "nvidia-smi-calls.jsonl"
    env = install(tmp_path / "bin", {"gpus": 8, "persistence": {"3": True}}, log)
    lab.gpu_pod("trainer", 0, annotations={"fleetplane.dev/last-checkpoint": str(T0 - 60)})
    lab.wait_running(1)

    seen: list[str | None] = []
    during_reset: dict[str, str] = {}
    dry_run_checked = False
    for index in range(20):
        now = T0 + index * STEP
        node = lab.nodes()[bad]
        if node.state == states.REMEDIATING and not lab.remedy_pods() and not dry_run_checked:
            # A dry run at the reset's turn: says what it would do, changes nothing.
            before = lab.client.get(object_path("v1", "nodes", None, bad))["metadata"]
            lab.run_pass(now, dry_run=True)
            after = lab.client.get(object_path("v1", "nodes", None, bad))["metadata"]
            assert "would start-remedy" in lab.last_out, lab.last_out
            assert "create privileged pod" in lab.last_out
            assert "nvidia.com/gpu.deploy.dcgm=false" in lab.last_out
            assert "fleetplane health reset --gpu 3" in lab.last_out
            assert not lab.remedy_pods() and calls(log) == []
            assert after["labels"] == before["labels"]
            assert after["annotations"] == before["annotations"]
            dry_run_checked = True
        lab.run_pass(now)
        pods = lab.remedy_pods()
        if pods:
            pod = pods[0]
            container = pod["spec"]["containers"][0]
            assert pod["spec"]["nodeName"] == bad
            assert container["securityContext"] == {"privileged": True}
            assert container["command"] == ["fleetplane", "health", "reset"]
            assert container["args"] == ["--gpu", "3"]
            assert pod["metadata"]["labels"]["app.kubernetes.io/name"] == REMEDY_APP
            labels = lab.nodes()[bad].view.labels
            during_reset = {k: labels.get(k, "") for k in OPERAND_DEPLOY_LABELS}
            assert lab.nodes()[bad].view.unschedulable, "reset only on a cordoned node"
        lab.kubelet_turn(env, tmp_path)
        lab.operator_turn(remediate=False)  # the validator's node; no integration answers
        state = lab.states()[bad]
        if (seen or state is not None) and (not seen or seen[-1] != state):
            seen.append(state)
        if state is None and len(seen) > 1:
            break
    assert dry_run_checked
    assert seen == [
        states.QUARANTINED,
        states.DRAINING,
        states.REMEDIATING,
        states.VALIDATING,
        None,
    ], (seen, lab.logs.getvalue().splitlines()[-10:])
    # What the stand-in nvidia-smi was asked, in order: the GPU of the fault, no other.
    assert calls(log) == [
        ["-i", "3", "--query-gpu=persistence_mode", "--format=csv,noheader"],
        ["-i", "3", "-pm", "0"],
        ["--gpu-reset", "-i", "3"],
        ["-i", "3", "-pm", "1"],
    ]
    assert state_of(env)["resets"] == [3]
    assert lab.remediated == [], "no integration was needed"
    # The GPU Operator's daemons were off during the reset and are back (absent, as before).
    assert during_reset == dict.fromkeys(OPERAND_DEPLOY_LABELS, "false")
    node = lab.nodes()[bad]
    assert all(k not in node.view.labels for k in OPERAND_DEPLOY_LABELS)
    assert not node.view.unschedulable and not node.tainted
    assert not lab.remedy_pods(), "the finished reset pod is deleted"
    events = lab.events(bad)
    for reason in (
        "GpuQuarantined",
        "GpuDraining",
        "GpuRemediationRequested",
        "GpuResetStarted",
        "GpuValidating",
        "GpuBackInService",
    ):
        assert reason in events, events
    assert events.index("GpuResetStarted") < events.index("GpuValidating")
    lines = lab.logs.getvalue()
    assert '"health.gpu-reset"' in lines or "health.gpu-reset" in lines
    assert node.detail.history[-1]["remedy"] == "gpu-reset"


def test_a_failed_reset_escalates_to_a_reboot_that_proves_itself_by_a_new_boot_id(
    lab_factory: Callable[..., HealthLab], tmp_path: Path
) -> None:
    lab = lab_factory(xid_on_gpu3_of_node0(48.0), nodes=2, recovery="act")
    bad = lab.names[0]
    log = tmp_path / "nvidia-smi-calls.jsonl"
    env = install(tmp_path / "bin", {"gpus": 8, "in_use": [3]}, log)
    path = object_path("v1", "nodes", None, bad)
    lab.client.merge_patch(path + "/status", {"status": {"nodeInfo": {"bootID": "boot-1"}}})
    rebooted = False
    for index in range(20):
        lab.run_pass(T0 + index * STEP)
        node = lab.nodes()[bad]
        reboot_pods = [
            p for p in lab.remedy_pods() if p["spec"]["containers"][0]["command"][-1] == "reboot"
        ]
        if reboot_pods and not rebooted:
            pod = reboot_pods[0]
            assert pod["spec"]["hostPID"] is True
            assert pod["spec"]["containers"][0]["command"] == ["fleetplane", "health", "reboot"]
            assert node.detail.boot_id == "boot-1" and node.detail.remedy == states.REBOOT
            # The node goes down and comes back: another boot ID (the pod is not run here:
            # this machine's PID 1 is not systemd, and it must not reboot).
            lab.client.merge_patch(path + "/status", {"status": {"nodeInfo": {"bootID": "boot-2"}}})
            rebooted = True
        else:
            lab.kubelet_turn(env, tmp_path)
        lab.operator_turn(remediate=False)
        if rebooted and lab.states()[bad] is None:
            break
    assert rebooted
    assert lab.states()[bad] is None
    assert ["--gpu-reset", "-i", "3"] in calls(log)
    history = lab.nodes()[bad].detail.history
    assert [h["remedy"] for h in history[-2:]] == ["gpu-reset", "reboot"], history
    assert "the GPU reset failed" in history[-2]["outcome"]
    events = lab.events(bad)
    assert events.index("GpuResetStarted") < events.index("NodeRebootStarted")
    assert not lab.remedy_pods()


def test_a_refused_reboot_escalates_to_replacement(
    lab_factory: Callable[..., HealthLab], tmp_path: Path
) -> None:
    lab = lab_factory(xid_on_gpu3_of_node0(79.0), nodes=2, recovery="act")
    bad = lab.names[0]
    for index in range(12):
        lab.run_pass(T0 + index * STEP)
        # The reboot command runs against an init that is not systemd: it refuses, and the
        # node needs a person.
        lab.kubelet_turn({}, tmp_path)
        if lab.states()[bad] == states.NEEDS_REPLACEMENT:
            break
    assert lab.states()[bad] == states.NEEDS_REPLACEMENT
    assert any(r.endswith(":2") for r in lab.remedies), lab.remedies
    assert "the reboot was refused" in lab.nodes()[bad].detail.history[-1]["outcome"]
    assert not lab.remedy_pods()
