"""The test servers take a free port and never mistake another listener for themselves."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from localfleet import processes, servers
from localfleet.servers import OpaServer, ServerError

pytestmark = pytest.mark.integration


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port something else is listening on."""
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        yield int(blocker.getsockname()[1])


def test_a_port_taken_in_between_is_replaced(
    taken_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """free_port() handed out a port another process bound before OPA could: OPA is started
    again on another port instead of failing (or answering from the other listener)."""
    handed = iter([taken_port])
    real = processes.free_port
    monkeypatch.setattr(
        processes, "free_port", lambda host="127.0.0.1": next(handed, None) or real(host)
    )
    with OpaServer() as server:
        assert server.port != taken_port
        assert servers._request("GET", f"{server.url}/health") == {}


def test_an_explicit_port_in_use_is_an_error_naming_its_holder(taken_port: int) -> None:
    """A fixed port something else holds: no start (nothing answers "for" the server from
    the other listener); the error names the port and the holder (this test's process)."""
    with pytest.raises(ServerError) as raised:
        OpaServer(port=taken_port).start(timeout=10)
    message = str(raised.value)
    assert f"port {taken_port}" in message and f"pid {os.getpid()} " in message, message


def test_free_ports_are_distinct_and_bindable() -> None:
    """A local cluster takes its six ports at once: none may be handed out twice (the kernel
    may reuse a port released a moment before), and each can be bound."""
    from localfleet.controlplane import free_ports

    for _ in range(20):
        ports = free_ports(6)
        assert len(set(ports)) == 6, ports
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", ports[0]))
