"""A stand-in kube-apiserver for the list tests that need answers no real one gives (410 on a
continue token, garbage bodies, JSON where protobuf was asked for): a loopback HTTP server whose
GETs are answered by a function, and a KubeClient pointed at it; `protobuf_body` wraps a message
as a kube-apiserver's protobuf answer."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from controller.observe.k8s_pb import runtime_pb2
from controller.observe.kube import PROTOBUF, Credentials, KubeClient

Query = dict[str, list[str]]
Respond = Callable[[str, Query, str], tuple[int, str, bytes]]
"""(path, query, Accept header) -> (status, Content-Type, body)"""


def protobuf_body(message: Any, kind: str) -> bytes:
    """`message` as a kube-apiserver's protobuf answer: the magic, then a `runtime.Unknown`."""
    envelope = runtime_pb2.Unknown()
    envelope.typeMeta.apiVersion = "v1"
    envelope.typeMeta.kind = kind
    envelope.raw = message.SerializeToString()
    envelope.contentType = PROTOBUF
    return b"k8s\x00" + envelope.SerializeToString()


@contextlib.contextmanager
def serving(respond: Respond) -> Iterator[KubeClient]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlparse(self.path)
            status, content_type, body = respond(
                url.path, parse_qs(url.query), self.headers.get("Accept", "")
            )
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = KubeClient(Credentials(server=f"http://127.0.0.1:{server.server_address[1]}"))
    try:
        yield client
    finally:
        client.close()
        server.shutdown()
        server.server_close()
