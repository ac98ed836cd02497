"""The pass's isolation of its concerns (pure: the snapshot and the concerns are stand-ins)."""

from __future__ import annotations

import io
from typing import Any

import pytest

from controller import reconcile
from controller.concerns import admission, burst, idle, preempt, spend
from controller.config import Settings
from controller.errors import (
    ControllerError,
    InjectedFault,
    LeaseHeldError,
    PermanentError,
    TemporaryError,
)
from controller.log import Log
from controller.observe.snapshot import Snapshot
from controller.summary import Summary
from tests.controller.builders import NOW, fleet


class NoKube:
    requests_made = 0


def empty_snapshot(kube: Any, *, log: Any = None, watched: Any = None) -> Snapshot:
    return Snapshot(taken_at=NOW, nodes={}, pods=[], namespaces={}, pdbs=[], priority_classes={})


def run(
    monkeypatch: pytest.MonkeyPatch, failing: str, error: ControllerError
) -> tuple[Summary, list[str], Log]:
    ran: list[str] = []

    def concern(name: str) -> Any:
        def run_it(*args: Any) -> Any:
            ran.append(name)
            if name == failing:
                raise error
            return set()

        return run_it

    monkeypatch.setattr(reconcile, "take_snapshot", empty_snapshot)
    monkeypatch.setattr(idle, "evidence", lambda *a: {})
    # the concerns that call the API even on an empty snapshot (bursting reads the Queues to
    # close tiers no longer used)
    steps = {
        "idle": idle,
        "spend": spend,
        "admission": admission,
        "preempt": preempt,
        "burst": burst,
    }
    for name, module in steps.items():
        monkeypatch.setattr(module, "run", concern(name))
    settings = Settings(
        prometheus_url="http://127.0.0.1:9", opa_url="http://127.0.0.1:9", dry_run=True
    )
    log = Log()
    summary = reconcile.run_pass(
        kube=NoKube(),  # type: ignore[arg-type]
        fleet=fleet(),
        settings=settings,
        now=NOW,
        out=io.StringIO(),
        log=log,
    )
    return summary, ran, log


@pytest.mark.parametrize(
    ("error", "kind"),
    [(PermanentError("HTTP 403"), "permanent"), (TemporaryError("HTTP 503"), "temporary")],
)
def test_a_failing_spend_is_counted_as_spend_and_preemption_still_runs(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    error: ControllerError,
    kind: str,
) -> None:
    caplog.set_level("INFO")
    summary, ran, _ = run(monkeypatch, "spend", error)
    assert ran == ["idle", "spend", "admission", "preempt", "burst"]
    assert "spend.failed" in [r.msg for r in caplog.records]
    assert summary.get("errors", concern="spend", kind=kind) == 1
    assert summary.get("errors", concern="observe", kind=kind) == 0


@pytest.mark.parametrize("failing", ["idle", "admission", "preempt"])
def test_every_concern_fails_on_its_own(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, failing: str
) -> None:
    caplog.set_level("INFO")
    summary, ran, _ = run(monkeypatch, failing, PermanentError("HTTP 403"))
    assert ran == ["idle", "spend", "admission", "preempt", "burst"]
    assert f"{failing}.failed" in [r.msg for r in caplog.records]
    assert summary.get("errors", concern=failing, kind="permanent") == 1
    assert summary.get("errors", concern="observe", kind="permanent") == 0


@pytest.mark.parametrize(
    "error", [LeaseHeldError("lease lost"), InjectedFault("killed")], ids=["lease", "kill"]
)
def test_a_lost_lease_or_a_kill_still_stops_the_pass(
    monkeypatch: pytest.MonkeyPatch, error: ControllerError
) -> None:
    if isinstance(error, InjectedFault):
        with pytest.raises(InjectedFault):
            run(monkeypatch, "spend", error)
        return
    summary, ran, _ = run(monkeypatch, "spend", error)
    assert ran == ["idle", "spend"]  # no preemption by a controller that may not hold the lease
    assert summary.skipped
