"""An answer the API server cuts short (past its request timeout while sending a large list) is
a temporary error of the request, as a timeout is: the pass reports it, it does not crash with
a library's exception."""

from __future__ import annotations

import socket
import threading

import pytest

from controller.errors import TemporaryError
from controller.observe.kube import Credentials, KubeClient


def cut_short_server() -> tuple[str, socket.socket]:
    """A loopback server that answers one request with a chunked body and closes mid-chunk."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n400\r\n" + b'{"items": [' + b" " * 100
        )
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    host, port = listener.getsockname()
    return f"http://{host}:{port}", listener


def test_an_answer_cut_short_is_a_temporary_error() -> None:
    server, listener = cut_short_server()
    try:
        client = KubeClient(Credentials(server=server), timeout=5)
        with pytest.raises(TemporaryError, match="ended prematurely"):
            client.request("GET", "/api/v1/nodes")
    finally:
        listener.close()
