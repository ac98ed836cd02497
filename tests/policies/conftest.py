"""Fixtures for the policy tests: the real OPA server (tests/conftest.py's `opa_server`) loaded
with the fixture configuration, and helpers to send AdmissionReviews and decision queries."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.policies.builders import Verdict, Workload

FIXTURES = Path(__file__).resolve().parent / "fixtures"


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


@pytest.fixture(scope="module")
def gate(opa_server: Any, fleet_config: dict[str, Any]) -> Gate:
    """OPA with the fixture configuration and no spend this month (set again per module, since
    the server is shared with other suites)."""
    opa_server.put_data("fleetplane/config", fleet_config)
    opa_server.put_data("fleetplane/spend", {})
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
