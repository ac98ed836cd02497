"""Fixtures for the policy tests: the real OPA server (tests/conftest.py's `opa_server`) loaded
with the fixture configuration, and helpers to send AdmissionReviews and decision queries."""

from __future__ import annotations

import csv
import json
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from policyreview.diff import CORPUS_DIR
from tests.policies.builders import Verdict, Workload
from tests.policies.lifetime_cases import CORPUS_WORKLOADS

FIXTURES = CORPUS_DIR
TRACE_COLUMNS = [
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
]


def write_trace(path: Path, rows: list[dict[str, Any]]) -> Path:
    """A pod trace in the Alibaba 2023 columns (policyreview.diff and the replay read these);
    unspecified columns get a one-hour running pod."""
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=TRACE_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow(
                {
                    "gpu_spec": "",
                    "pod_phase": "Running",
                    "creation_time": 0,
                    "scheduled_time": 0,
                    "deletion_time": 3600,
                    "cpu_milli": 4000,
                    "memory_mib": 8192,
                    **row,
                }
            )
    return path


def production_shaped_trace(path: Path, pods: int, seed: int = 7) -> Path:
    """A synthetic trace with the shapes of the Alibaba one: CPU pods, GPU-sharing pods,
    latency-sensitive and best-effort pods of 1 to 8 GPUs, runtimes from minutes to days."""
    rng = random.Random(seed)
    rows = []
    for i in range(pods):
        gpus = rng.choice([0, 1, 1, 1, 2, 4, 8])
        rows.append(
            {
                "name": f"pod-{i:04d}",
                "num_gpu": gpus,
                "gpu_milli": rng.choice([1000, 1000, 460, 250]) if gpus else 0,
                "qos": rng.choice(["LS", "LS", "BE", "Burstable"]),
                "creation_time": i * 60,
                "scheduled_time": i * 60,
                "deletion_time": i * 60 + rng.choice([600, 3600, 86400, 7 * 86400]),
            }
        )
    return write_trace(path, rows)


def current_month() -> str:
    """The month OPA's clock is in (UTC), as data.fleetplane.spend records it."""
    return time.strftime("%Y-%m", time.gmtime())


class Gate:
    """The admission gate of a running OPA: send a review, read the verdict."""

    def __init__(self, server: Any) -> None:
        self.server = server

    def review(self, subject: Workload | dict[str, Any]) -> Verdict:
        review = subject.review() if isinstance(subject, Workload) else subject
        answer = self.server.review(review)
        assert answer["apiVersion"] == "admission.k8s.io/v1"
        assert answer["kind"] == "AdmissionReview"
        return Verdict(answer["response"])

    def decide(self, name: str, request: Any) -> dict[str, Any]:
        return dict(self.server.query(f"fleetplane/decisions/{name}/decision", request))


@pytest.fixture(scope="session")
def fleet_config() -> dict[str, Any]:
    return dict(json.loads((FIXTURES / "config.json").read_text()))


def fixture_approvals(now: float | None = None) -> dict[str, Any]:
    """The approvals of the Rego fixture (data.fleetplane.testing.approvals), against the real
    clock: APR-2026-001 lets team research hold up to 64 accelerators for 30 more days, in any
    one workload (unbound)."""
    start = int(time.time() if now is None else now)
    return {
        "APR-2026-001": {
            "team": "research",
            "max_accelerators": 64,
            "expires_at": start + 2592000,
            "uid": None,
        }
    }


@pytest.fixture(scope="module")
def gate(opa_server: Any, fleet_config: dict[str, Any]) -> Gate:
    """OPA with the fixture configuration and approvals and no spend this month (set again per
    module, since the server is shared with other suites)."""
    opa_server.put_data("fleetplane/config", fleet_config)
    opa_server.put_data("fleetplane/approvals", fixture_approvals())
    opa_server.put_data("fleetplane/spend", {})
    # the controller's records the case table's disruption budgets select (lifetime_cases.py)
    opa_server.put_data("fleetplane/workloads", CORPUS_WORKLOADS)
    return Gate(opa_server)


@pytest.fixture
def spend(gate: Gate) -> Iterator[Callable[..., None]]:
    """Set month-to-date spend per team (this month unless told); reset afterwards."""

    def set_spend(month: str | None = None, **usd_by_team: Any) -> None:
        document = {
            team: {"month": month or current_month(), "usd": usd, "updated_at": int(time.time())}
            for team, usd in usd_by_team.items()
        }
        gate.server.put_data("fleetplane/spend", document)

    yield set_spend
    gate.server.put_data("fleetplane/spend", {})
