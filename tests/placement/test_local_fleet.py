"""The local fleet runs the placement service when the stack asks for it on loopback, and
stops it with the other services."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from localfleet.processes import free_port, http_ok
from localfleet.stackservices import StackServices
from localfleet.stackstatus import StackStatus


def fleet(placement: str, url: str | None) -> Any:
    return SimpleNamespace(volcano=SimpleNamespace(placement=placement, placement_url=url))


@pytest.mark.integration
def test_the_service_runs_on_the_stacks_loopback_port_and_stops(tmp_path: Path) -> None:
    services = StackServices(layout=SimpleNamespace(services_dir=tmp_path))  # type: ignore[arg-type]
    services.start_placement(fleet("volcano", None))
    assert services.placement.pid() is None
    port = free_port("127.0.0.1")
    services.start_placement(fleet("fgd", f"http://127.0.0.1:{port}"))
    try:
        pid = services.placement.pid()
        assert pid is not None
        assert http_ok(f"http://127.0.0.1:{port}/healthz")
        status = StackStatus(layout=None, services=services, controller=None)  # type: ignore[arg-type]
        assert status.placement_status(fleet("fgd", f"http://127.0.0.1:{port}")) == (
            f"placement: fgd, the placement service at http://127.0.0.1:{port} running ({pid})"
        )
    finally:
        services.placement.stop()
    assert not http_ok(f"http://127.0.0.1:{port}/healthz")
