"""The replay's OPA client speaks just enough HTTP/1.1: bodies by Content-Length or chunked,
no body on 204, a fresh connection after `Connection: close` or a dropped connection."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest

from replay.opa import BatchClient, PolicyError


class Scripted:
    """A loopback server answering each request with the next scripted response (raw bytes;
    None drops the connection without an answer); records what it received."""

    def __init__(self, responses: list[bytes | None]) -> None:
        self.responses = list(responses)
        self.requests: list[bytes] = []
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.responses:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            with conn, conn.makefile("rb") as reader:
                while self.responses:
                    head = b""
                    while not head.endswith(b"\r\n\r\n"):
                        line = reader.readline()
                        if not line:
                            break
                        head += line
                    if not head:
                        break
                    length = next(
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    )
                    self.requests.append(head + reader.read(length))
                    response = self.responses.pop(0)
                    if response is None:
                        break
                    conn.sendall(response)
                    if b"Connection: close" in response:
                        break
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)  # the client sees the end at once

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def scripted() -> Iterator[type[Scripted]]:
    servers: list[Scripted] = []

    class Tracked(Scripted):
        def __init__(self, responses: list[bytes | None]) -> None:
            super().__init__(responses)
            servers.append(self)

    yield Tracked
    for server in servers:
        server.close()


def test_bodies_by_length_chunked_and_none_on_one_connection(scripted: type[Scripted]) -> None:
    server = scripted(
        [
            b'HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{"a": true}',
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b'4\r\n{"b"\r\n6;x=1\r\n: [1, \r\n2\r\n2]\r\n1\r\n}\r\n0\r\n\r\n',
            b"HTTP/1.1 204 No Content\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
        ]
    )
    client = BatchClient(f"http://127.0.0.1:{server.port}")
    assert client._request("POST", "/v1/data/x", b"{}", "application/json") == {"a": True}
    assert client._request("POST", "/v1/data/y", b"{}", "application/json") == {"b": [1, 2]}
    assert client._request("PUT", "/v1/data/z", b"[1]", "application/json") is None
    assert client._request("POST", "/v1/data/x", b"{}", "application/json") == {}
    client.close()
    assert server.connections == 1
    first = server.requests[0]
    assert first.startswith(b"POST /v1/data/x HTTP/1.1\r\n")
    assert b"Content-Length: 2\r\n" in first and first.endswith(b"\r\n\r\n{}")
    assert server.requests[2].startswith(b"PUT /v1/data/z ") and server.requests[2].endswith(b"[1]")


def test_a_closed_or_dropped_connection_is_opened_again(scripted: type[Scripted]) -> None:
    server = scripted(
        [
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
            None,  # dropped without an answer: the client asks again on a new connection
            b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n[1,2,3]",
        ]
    )
    client = BatchClient(f"http://127.0.0.1:{server.port}")
    assert client._request("POST", "/a", b"{}", "application/json") == {}
    assert client._request("POST", "/b", b"{}", "application/json") == [1, 2, 3]
    client.close()
    assert server.connections == 3
    assert [r.split(b" ")[1] for r in server.requests] == [b"/a", b"/b", b"/b"]


def test_an_error_status_is_a_policy_error(scripted: type[Scripted]) -> None:
    server = scripted([b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nno policy"])
    client = BatchClient(f"http://127.0.0.1:{server.port}")
    with pytest.raises(PolicyError, match="HTTP 404: no policy"):
        client._request("POST", "/v1/data/x", b"{}", "application/json")
    client.close()
