"""Idle reclamation's step: DCGM evidence (fetched while the snapshot is taken), then warn,
clear and reclaim (decide.idle, act.idle)."""

from __future__ import annotations

from controller.act.idle import act_on_idle
from controller.concerns import PassView
from controller.config import FleetView
from controller.decide.idle import EvidenceRules, plan_idle
from controller.errors import ControllerError
from controller.observe.metrics import PodEvidence, Prometheus

Evidence = dict[int, dict[tuple[str, str], PodEvidence]]


def evidence(fleet: FleetView, prometheus: Prometheus, now: float) -> Evidence | ControllerError:
    """The prefetch: DCGM evidence does not depend on the snapshot, so it is read meanwhile.
    An error is returned, not raised: the step reports it as the concern's."""
    # Per window, the highest idle threshold of the types using it: pods with a GPU above it
    # are busy on their peak utilisation alone (observe.metrics reads no more for them).
    windows: dict[int, float] = {}
    for wt in fleet.workload_types.values():
        if wt.idle:
            window = wt.idle.window_seconds
            line = wt.idle.util_threshold_percent
            windows[window] = max(windows.get(window, line), line)
    try:
        return prometheus.evidence_for_windows(windows, now)
    except ControllerError as error:
        return error


def run(view: PassView) -> set[str]:
    rt, found = view.rt, view.found
    if isinstance(found, ControllerError):
        rt.report(
            "idle",
            "idle.metrics-unavailable",
            found,
            consequence="no evidence: nothing is warned or reclaimed in this pass",
        )
        return set()
    rules = EvidenceRules(
        scrape_interval_seconds=rt.settings.scrape_interval_seconds,
        min_sample_coverage=rt.settings.min_sample_coverage,
        fb_steady_mib=rt.settings.fb_steady_mib,
    )
    plan = plan_idle(view.snapshot.pods, rt.fleet, found, rt.now, rules)
    return act_on_idle(rt, plan)
