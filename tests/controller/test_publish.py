"""A pass's summary is published the same way for every pass: the textfile, and the
Pushgateway under the pass's own job."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from controller import startup
from controller.summary import Summary


class _Log:
    def __init__(self) -> None:
        self.errors: list[tuple[str, dict[str, Any]]] = []

    def error(self, event: str, **fields: Any) -> None:
        self.errors.append((event, fields))


class _Settings:
    def __init__(self, url: str | None) -> None:
        self.pushgateway_url = url


def _as_any(stand_in: object) -> Any:
    return stand_in


def test_publish_writes_the_textfile_and_pushes_under_the_pass_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = Summary()
    summary.set("upgrade_halted", 1, pool="a100")
    pushed: list[tuple[str, str]] = []
    monkeypatch.setattr(Summary, "push", lambda self, url, *, job: pushed.append((url, job)))
    metrics = tmp_path / "m.prom"
    args = argparse.Namespace(metrics_file=metrics)
    startup.publish(
        summary,
        args,
        _as_any(_Settings("http://gw:9091")),
        _as_any(_Log()),
        job="fleetplane-controller-upgrade",
    )
    assert 'fleetplane_controller_upgrade_halted{pool="a100"} 1' in metrics.read_text()
    assert pushed == [("http://gw:9091", "fleetplane-controller-upgrade")]


def test_publish_without_a_gateway_pushes_nothing_and_a_failed_push_is_logged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from controller.errors import TemporaryError

    def refuse(self: Summary, url: str, *, job: str) -> None:
        raise TemporaryError("down")

    monkeypatch.setattr(Summary, "push", refuse)
    log = _Log()
    startup.publish(
        Summary(), argparse.Namespace(), _as_any(_Settings(None)), _as_any(log), job="j"
    )
    assert log.errors == []
    startup.publish(
        Summary(), argparse.Namespace(), _as_any(_Settings("http://gw")), _as_any(log), job="j"
    )
    assert [e for e, _ in log.errors] == ["summary.push.failed"]
