"""The one supervisor of the local fleet's servers: who holds a port, a fixed port refused when
taken, and a detached server found again (by a new object) from its pid and port files."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from localfleet.processes import (
    ServerError,
    Supervisor,
    alive,
    http_ok,
    port_holder,
    require_port,
)


@pytest.fixture
def listener() -> Iterator[int]:
    """A loopback port this process listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_the_holder_of_a_port_is_named_by_pid_and_command(listener: int) -> None:
    holder = port_holder(listener)
    assert holder is not None and holder.startswith(f"pid {os.getpid()} ("), holder


def test_a_port_nobody_listens_on_has_no_holder() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, not listening: then released
        port = int(sock.getsockname()[1])
    assert port_holder(port) is None
    require_port("test", "127.0.0.1", port)  # free: no error


def test_a_taken_fixed_port_fails_naming_the_port_and_its_holder(listener: int) -> None:
    with pytest.raises(ServerError) as raised:
        require_port("pushgateway", "127.0.0.1", listener)
    message = str(raised.value)
    assert message.startswith(f"pushgateway: port {listener} "), message
    assert f"pid {os.getpid()} " in message, message


def http_server(port: int) -> list[str]:
    return [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)]


@pytest.mark.integration
def test_a_detached_server_is_found_and_stopped_by_another_supervisor(tmp_path: Path) -> None:
    """What `fleetplane up` starts, `fleetplane status` and `down` (new processes) find."""
    first = Supervisor("web", tmp_path / "web", detached=True)
    port = first.serve(http_server, lambda p: http_ok(f"http://127.0.0.1:{p}/"), timeout=30)
    pid = first.pid()
    assert pid is not None and alive(pid)
    again = Supervisor("web", tmp_path / "web", detached=True)
    assert (again.pid(), again.port()) == (pid, port)
    again.stop()
    assert not alive(pid)
    assert again.pid() is None and first.pid() is None
    assert not (tmp_path / "web" / "pid").exists()


@pytest.mark.integration
def test_an_attached_server_is_stopped_with_its_group(tmp_path: Path) -> None:
    server = Supervisor("web", tmp_path / "web")
    port = server.serve(http_server, lambda p: http_ok(f"http://127.0.0.1:{p}/"), timeout=30)
    pid = server.pid()
    assert pid is not None and port > 0
    assert not (tmp_path / "web" / "pid").exists()  # nothing to find it by: it is ours
    server.stop()
    assert not alive(pid)
