"""The one pod view of the node workflows, as each mode builds it: the upgrade's from the API's
JSON alone, the health machine's with what an eviction costs (GPUs held, start) read by the
shared decoder of `controller.observe.model`."""

from __future__ import annotations

import copy

import pytest

from controller.nodeflow.consumers import Role
from controller.nodeflow.gangs import in_play
from controller.nodeflow.pods import checkpoint_at, pod_view
from controller.remediation.observe import work_pod
from controller.remediation.settings import HealthSettings
from controller.upgrade.observe import pod_view as upgrade_pod_view
from tests.controller.upgrade.builders import SETTINGS, pod

NOW = 1_800_000_000.0


def test_both_modes_build_the_same_view() -> None:
    raw = pod("train").on("gpu-1").gpus(2).owned_by("Job").checkpointed(NOW - 60).raw
    raw["status"]["startTime"] = "2027-01-15T08:00:00Z"
    upgrade = upgrade_pod_view(copy.deepcopy(raw), SETTINGS)
    health = work_pod(copy.deepcopy(raw), HealthSettings(workflow=SETTINGS))
    assert upgrade.role is health.role is Role.WORKLOAD
    assert upgrade.gpu == health.gpu == "container main requests nvidia.com/gpu: 2"
    assert (upgrade.devices, upgrade.started) == (0, None)
    assert health.devices == 2
    assert health.started is not None and health.started > 0
    # Apart from what an eviction costs, one view.
    assert health.__class__ is upgrade.__class__
    assert checkpoint_at(health, NOW) == checkpoint_at(upgrade, NOW) == NOW - 60


def test_generic_builder_takes_the_driver_pods_selector() -> None:
    raw = pod("driver", "gpu-operator").labels(app="nvidia-driver-daemonset").raw
    view = pod_view(
        raw,
        driver_namespace=SETTINGS.driver_namespace,
        driver_selector=SETTINGS.driver_selector,
    )
    assert view.role is Role.DRIVER
    assert view.gpu is None


@pytest.mark.parametrize(
    ("phase", "deleting", "expected"),
    [("Running", False, True), ("Running", True, False), ("Succeeded", False, False)],
)
def test_in_play(phase: str, deleting: bool, expected: bool) -> None:
    builder = pod("p").phase(phase)
    if deleting:
        builder = builder.deleting()
    view = builder.view()
    assert in_play(view) is expected
    assert view.terminal is (phase == "Succeeded")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("inf", None), ("nan", None), ("-5", None), ("1e20", None), ("soon", None)],
)
def test_an_untrustworthy_checkpoint_is_none(text: str, expected: float | None) -> None:
    assert checkpoint_at(pod("p").checkpointed(text).view(), NOW) is expected
