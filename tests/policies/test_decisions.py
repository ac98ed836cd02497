"""The decisions the controller asks for, through a real OPA server: reclaim, preempt and
upgrade each answer {"allow": bool, "reasons": [...]} and allow only on explicit evidence."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.policies.conftest import Gate

pytestmark = pytest.mark.integration

NOW = 1795003600  # Wednesday 2026-11-18 12:06:40 UTC


def _merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _pod(
    namespace: str, workload_type: str, gpus: int = 1, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{workload_type}-0",
            "namespace": namespace,
            "labels": {"fleetplane.dev/workload-type": workload_type, **(labels or {})},
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/x",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ]
        },
    }


# ------------------------------------------------------------------------ reclaim

IDLE_NOTEBOOK = {
    "pod": _pod("ml-research", "notebook"),
    "workload_type": "notebook",
    "idle": {
        "window_seconds": 3600,
        "samples": 60,
        "expected_samples": 60,
        "max_util_percent": 0.0,
        "max_engine_active": 0.0,
        "max_fb_used_mib": 512,
        "warned_at": NOW - 1000,
        "now": NOW,
    },
}

RECLAIM_CASES: dict[str, tuple[dict[str, Any], bool, str]] = {
    "idle and warned past the grace": ({}, True, "warned 1000s ago"),
    "inference is never reclaimed": (
        {"workload_type": "inference", "pod": _pod("ml-serving", "inference")},
        False,
        "workload type inference is never reclaimed",
    ),
    "exempt": (
        {"pod": _pod("ml-research", "notebook", labels={"fleetplane.dev/exempt": "true"})},
        False,
        "labelled fleetplane.dev/exempt=true",
    ),
    "incomplete samples": ({"idle": {"samples": 45}}, False, "45 of 60 expected samples"),
    "window too short": ({"idle": {"window_seconds": 600}}, False, "less than the 1800s window"),
    "busy": ({"idle": {"max_util_percent": 30.0}}, False, "above the 5% idle threshold"),
    "not warned": ({"idle": {"warned_at": None}}, False, "no idle warning has been issued yet"),
    "grace not elapsed": ({"idle": {"warned_at": NOW - 60}}, False, "grace period has not elapsed"),
    "warning older than the window": (
        {"idle": {"warned_at": NOW - 7200}},
        False,
        "not inside the idle window",
    ),
    "malformed evidence": (
        {"idle": {"samples": "60"}},
        False,
        "input.idle.samples must be a number",
    ),
}


@pytest.mark.parametrize(
    ("patch", "allow", "reason"), RECLAIM_CASES.values(), ids=RECLAIM_CASES.keys()
)
def test_reclaim(gate: Gate, patch: dict[str, Any], allow: bool, reason: str) -> None:
    decision = gate.decide("reclaim", _merge(IDLE_NOTEBOOK, patch))
    assert decision["allow"] is allow
    assert any(reason in r for r in decision["reasons"]), decision["reasons"]


def test_reclaim_without_input_is_refused(gate: Gate) -> None:
    decision = gate.decide("reclaim", {})
    assert decision["allow"] is False
    assert "input.idle must be an object" in decision["reasons"]


# ------------------------------------------------------------------------ preempt

PREEMPTION = {
    "preemptor": {
        "pod": _pod("ml-research", "training", 8),
        "workload_type": "training",
        "priority": 1000,
        "pending_seconds": 900,
    },
    "victim": {
        "pod": _pod("analytics", "batch", 2),
        "workload_type": "batch",
        "priority": 100,
        "running_seconds": 7200,
        "seconds_since_checkpoint": 300,
        "team_usage": {"nvidia.com/gpu": 6},
    },
    "now": NOW,
}

PREEMPT_CASES: dict[str, tuple[dict[str, Any], bool, str]] = {
    "borrowing batch of another team": ({}, True, "keeps at least its guaranteed quota"),
    "same priority": ({"victim": {"priority": 1000}}, False, "is not higher than"),
    "not preemptible by label": (
        {
            "victim": {
                "pod": _pod("analytics", "batch", 2, labels={"fleetplane.dev/preemptible": "false"})
            }
        },
        False,
        "not preemptible",
    ),
    "not preemptible by type": (
        {"victim": {"workload_type": "inference"}},
        False,
        "not preemptible",
    ),
    "exempt": (
        {
            "victim": {
                "pod": _pod("analytics", "batch", 2, labels={"fleetplane.dev/exempt": "true"})
            }
        },
        False,
        "labelled fleetplane.dev/exempt=true",
    ),
    "victim team at its guarantee": (
        {"victim": {"team_usage": {"nvidia.com/gpu": 3}}},
        False,
        "would fall below its guaranteed quota",
    ),
    "victim too young": ({"victim": {"running_seconds": 60}}, False, "less than the 300s minimum"),
    "same team ignores quota": (
        {"victim": {"pod": _pod("ml-research", "batch", 2), "team_usage": {"nvidia.com/gpu": 0}}},
        True,
        "both workloads belong to team research",
    ),
    "priority missing": ({"preemptor": {"priority": None}}, False, "input.preemptor.priority"),
}


@pytest.mark.parametrize(
    ("patch", "allow", "reason"), PREEMPT_CASES.values(), ids=PREEMPT_CASES.keys()
)
def test_preempt(gate: Gate, patch: dict[str, Any], allow: bool, reason: str) -> None:
    decision = gate.decide("preempt", _merge(PREEMPTION, patch))
    assert decision["allow"] is allow
    assert any(reason in r for r in decision["reasons"]), decision["reasons"]


# ------------------------------------------------------------------------ upgrade

SATURDAY_AFTERNOON = 1795219200 + 14 * 3600

UPGRADE = {
    "node": {"metadata": {"name": "gpu-1", "labels": {"fleetplane.dev/pool": "h100-spot"}}},
    "pool": "h100-spot",
    "pool_nodes": 20,
    "pool_unavailable": 1,
    "now": SATURDAY_AFTERNOON,
}

UPGRADE_CASES: dict[str, tuple[dict[str, Any], bool, str]] = {
    "weekend with room": ({}, True, 'below max_unavailable "10%" = 2'),
    "weekday noon": ({"now": NOW}, False, "outside every maintenance window"),
    "wednesday night window": (
        {"now": 1794960000 + 23 * 3600},
        True,
        "inside a maintenance window",
    ),
    "pool at its limit": ({"pool_unavailable": 2}, False, "allows 2 at once"),
    "small pool rounds up to one": ({"pool_nodes": 5, "pool_unavailable": 0}, True, "= 1"),
    "integer max_unavailable": (
        {
            "pool": "a100-on-demand",
            "node": {"metadata": {"labels": {"fleetplane.dev/pool": "a100-on-demand"}}},
            "pool_unavailable": 1,
        },
        True,
        "below max_unavailable 2 = 2",
    ),
    "node of another pool": (
        {"node": {"metadata": {"labels": {"fleetplane.dev/pool": "tpu-v5e"}}}},
        False,
        'label is "tpu-v5e"',
    ),
    "unknown pool": ({"pool": "nope"}, False, 'pool "nope" is not configured'),
    "malformed count": (
        {"pool_nodes": "20"},
        False,
        "input.pool_nodes must be a non-negative integer",
    ),
}


@pytest.mark.parametrize(
    ("patch", "allow", "reason"), UPGRADE_CASES.values(), ids=UPGRADE_CASES.keys()
)
def test_upgrade(gate: Gate, patch: dict[str, Any], allow: bool, reason: str) -> None:
    decision = gate.decide("upgrade", _merge(UPGRADE, patch))
    assert decision["allow"] is allow
    assert any(reason in r for r in decision["reasons"]), decision["reasons"]
