"""An Alertmanager webhook receiver for tests: a loopback HTTP server that keeps each
notification's JSON body, in arrival order."""

from __future__ import annotations

import contextlib
import json
import queue
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Received = queue.Queue[dict[str, Any]]


@contextlib.contextmanager
def alert_receiver() -> Iterator[tuple[str, Received]]:
    """(the receiver's URL for Alertmanager's webhook_configs, the notifications received)."""
    received: Received = queue.Queue()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            received.put(json.loads(body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/alerts", received
    finally:
        server.shutdown()
        server.server_close()
