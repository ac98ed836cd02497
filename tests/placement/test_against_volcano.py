"""The placement service held against the replay's FGD on the real vc-scheduler: pack mode's
real-scheduler check (replay/pack/realcheck.py; the same 300 trace pods, seed 7, on KWOK nodes
of the trace's shapes, submitted one after another) with the scheduler configured as
`volcano.placement: fgd` configures it (the shipped tiers plus the extender calling the
service). `-s` prints the figures."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import pytest

from fleet.placement import METRICS_PATH, with_extender
from fleet.volcano import SCHEDULER_TIERS
from localfleet.controlplane import LocalCluster
from localfleet.placement import PlacementServer
from replay.pack import realcheck
from replay.pack.volcano import SHIPPED, VolcanoScoring
from replay.trace import DEFAULT_TRACE_DIR, read_nodes, read_pod_requests
from tests.placement.fgd_model import FgdModel
from tests.replay.test_pack_against_volcano import (
    AGREEMENT,
    FAST_PERIOD,
    PODS,
    SEED,
    check,
    fast_volcano,
    restart_scheduler,
)

pytestmark = pytest.mark.integration

__all__ = ["fast_volcano"]  # the fixture, used by name

TRACE = Path(DEFAULT_TRACE_DIR)
DEFAULT_LIST = TRACE / "openb_pod_list_default.csv"


def shipped_unplaced() -> int:
    """Pods the shipped configuration's model leaves unplaced on the same sample (its model
    agrees with the real scheduler pod for pod: tests/replay/test_pack_against_volcano.py)."""
    drawn = realcheck.sample(
        read_pod_requests(DEFAULT_LIST),
        read_nodes(TRACE / "openb_node_list_gpu_node.csv"),
        count=PODS,
        seed=SEED,
    )
    placed = realcheck.model_placement(drawn.pods, drawn.nodes, VolcanoScoring(SHIPPED))
    return sum(node is None for node in placed.values())


def service_calls(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + METRICS_PATH, timeout=5) as response:
        text = response.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("fleetplane_placement_") and " " in line:
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_the_real_scheduler_places_by_fgd_with_the_service(
    kube: LocalCluster, fast_volcano: Any, tmp_path: Path
) -> None:
    """With the service, Volcano's node is among FGD's best for at least 95 % of the pods
    (FGD as the replay's pack mode computes it, over the pod list's workload: the service
    runs with the shipped seed, the same list, and learns nothing more here), and fewer pods
    stay unplaced than with the shipped configuration."""
    with PlacementServer(work_dir=tmp_path / "placement", recent_pods=0) as service:
        restart_scheduler(
            fast_volcano, period=FAST_PERIOD, tiers=with_extender(SCHEDULER_TIERS, service.url)
        )
        # FgdModel has VolcanoScoring's seam (fitting, scores), which is all `check` uses.
        model: Any = FgdModel(read_pod_requests(DEFAULT_LIST))
        comparison = check(kube, "volcano.placement: fgd", model)
        calls = service_calls(service.url)
    shipped = shipped_unplaced()
    unplaced = len(comparison.tie_aware.unplaced_real)
    print(f"unplaced: with the service {unplaced}, shipped configuration (model) {shipped}")
    print("service:", {k: v for k, v in calls.items() if "bucket" not in k})
    assert not comparison.timed_out, comparison.text()
    assert calls['fleetplane_placement_requests_total{verb="prioritize",outcome="ok"}'] > 0
    assert comparison.decisions_agreeing >= AGREEMENT * comparison.pods, comparison.text()
    assert unplaced < shipped, comparison.text()
