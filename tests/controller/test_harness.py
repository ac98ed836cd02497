"""The one except ladder every pass runs under (pure: no server is asked anything)."""

from __future__ import annotations

import io
from typing import Any

import pytest

from controller.config import Settings
from controller.errors import (
    InjectedFault,
    LeaseHeldError,
    PermanentError,
    TemporaryError,
)
from controller.harness import PassHarness
from controller.log import Log
from tests.controller.builders import NOW, fleet


class CountingKube:
    requests_made = 0


def harness(**given: Any) -> PassHarness:
    settings = Settings(
        prometheus_url="http://127.0.0.1:9", opa_url="http://127.0.0.1:9", dry_run=True
    )
    return PassHarness(
        kube=CountingKube(),  # type: ignore[arg-type]
        fleet=fleet(),
        settings=settings,
        events="upgrade.pass",
        failure_concern="upgrade",
        out=io.StringIO(),
        log=Log(),
        **given,
    )


def fails_with(error: Exception) -> Any:
    def body() -> None:
        raise error

    return body


@pytest.mark.parametrize(
    ("error", "kind"),
    [(PermanentError("HTTP 403"), "permanent"), (TemporaryError("HTTP 503"), "temporary")],
)
def test_a_failed_pass_is_counted_under_its_concern_by_kind(
    caplog: pytest.LogCaptureFixture, error: Exception, kind: str
) -> None:
    caplog.set_level("INFO")
    h = harness()
    h.run(fails_with(error))
    summary = h.finish()
    assert h.error == str(error) and h.skipped is None
    assert summary.get("errors", concern="upgrade", kind=kind) == 1
    assert summary.get("passes", outcome="failed") == 1
    assert [r.msg for r in caplog.records] == ["upgrade.pass.failed", "upgrade.pass.summary"]


def test_a_lease_held_elsewhere_skips_the_pass(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO")
    h = harness()
    h.run(fails_with(LeaseHeldError("held by another")))
    summary = h.finish()
    assert h.skipped == summary.skipped == "held by another" and h.error is None
    assert summary.errors == 0
    assert summary.get("passes", outcome="skipped") == 1
    assert "upgrade.pass.skipped" in [r.msg for r in caplog.records]


def test_a_simulated_kill_goes_through_and_the_clients_are_closed() -> None:
    closed: list[str] = []
    h = harness(prometheus=True)
    assert h.prometheus is not None
    h.opa.close = lambda: closed.append("opa")  # type: ignore[method-assign]
    h.prometheus.close = lambda: closed.append("prometheus")  # type: ignore[method-assign]
    with pytest.raises(InjectedFault):
        h.run(fails_with(InjectedFault("killed")))
    assert closed == ["opa", "prometheus"]


def test_a_prometheus_given_is_used_and_left_open() -> None:
    given = harness(prometheus=True).prometheus
    assert given is not None
    given.close = lambda: pytest.fail("closed a client it was given")  # type: ignore[method-assign]
    h = harness(prometheus=given)
    h.run(lambda: None)
    assert h.prometheus is given and h.error is None


def test_the_runtime_is_the_passes_own() -> None:
    h = harness()
    rt = h.runtime(NOW)
    assert (rt.kube, rt.opa, rt.summary, rt.now, rt.dry_run) == (
        h.kube,
        h.opa,
        h.summary,
        NOW,
        True,
    )
    assert h.lease is None  # a dry run takes no Lease
