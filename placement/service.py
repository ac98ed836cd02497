"""The placement service: Volcano's extender protocol over HTTP (the standard library's
threading server; no framework is a dependency of the product, and the protocol is four
paths).

Volcano sends every candidate node with its `v1.Node` and the pods on it (megabytes at a
thousand nodes); simdjson parses the body lazily and only the fields scored become Python
values (ten times less CPU than decoding it whole: bench/placement_latency.py).

- `POST /prioritize`: `PrioritizeRequest{task, nodes}` → `PrioritizeResponse{nodeScore,
  errorMessage}`: every candidate node's rank by FGD's score, its ties by best fit, times
  `SCORE_SCALE` (placement.points), so that the service decides in Volcano's sum and the
  shipped plugins only break its remaining ties. A node where the task's GPUs do not fit by the service's
  count (a share without room) scores 0.
- `GET /healthz`: 200 when the workload distribution is loaded.
- `GET /metrics`: placement.metrics.

A malformed request is answered 400: vc-scheduler then logs it and, the extender being
`ignorable`, scores the task without the service.
"""

from __future__ import annotations

import logging
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import simdjson

from fleet.placement import (
    GPU_SHARE_ANNOTATION,
    HEALTH_PATH,
    METRICS_PATH,
    PRIORITIZE_VERB,
)
from placement import fgd
from placement.metrics import Metrics
from placement.points import volcano_points
from placement.volcano_json import BadRequest, read_nodes, read_task
from placement.workload import Workload

log = logging.getLogger("placement")


class Scorer:
    """One prioritize call: read, learn, score."""

    def __init__(self, workload: Workload, metrics: Metrics | None = None) -> None:
        self.workload = workload
        self.metrics = metrics or Metrics()

    def prioritize(self, request: Any, *, shares: bool = True) -> dict[str, Any]:
        """`request`: a dict, or simdjson's lazy Object of the body (the service's: only the
        fields scored are read out of the megabytes Volcano sends)."""
        task = read_task(request.get("task"))
        table = read_nodes(request.get("nodes"), shares=shares)
        d = task.demand
        self.workload.observe(
            task.uid,
            fgd.Shape(
                cpu_milli=d.cpu_milli,
                gpu_milli=d.gpu_milli,
                num_gpu=d.num_gpu,
                gpu_spec=task.gpu_spec,
            ),
        )
        typical = self.workload.typical()
        self.metrics.learned = self.workload.learned
        self.metrics.typical = len(typical.weight)
        if not table.names:
            return {"nodeScore": {}, "errorMessage": ""}
        nodes = table.for_typical(typical)
        scores, _ = fgd.scores(typical, nodes, d)
        points = volcano_points(scores, nodes, d)
        return {
            "nodeScore": {n: float(s) for n, s in zip(table.names, points.tolist(), strict=True)},
            "errorMessage": "",
        }

    def answer(self, raw: bytes) -> tuple[bytes, int]:
        """The response body to a request body, and how many nodes it scores."""
        request = simdjson.Parser().parse(raw)
        if not hasattr(request, "get"):
            raise BadRequest("the request is not a JSON object")
        answer = self.prioritize(request, shares=GPU_SHARE_ANNOTATION.encode() in raw)
        del request  # the lazy document holds the parser's buffer
        return orjson.dumps(answer), len(answer["nodeScore"])


class Handler(BaseHTTPRequestHandler):
    server: PlacementServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet: metrics count calls
        log.debug(format, *args)

    def _reply(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == HEALTH_PATH:
            self._reply(200, b"ok\n", "text/plain")
        elif self.path == METRICS_PATH:
            self._reply(
                200, self.server.scorer.metrics.text().encode(), "text/plain; version=0.0.4"
            )
        else:
            self._reply(404, b"not found\n", "text/plain")

    def do_POST(self) -> None:
        began = time.perf_counter()
        verb = self.path.strip("/")
        if verb != PRIORITIZE_VERB:
            self._reply(404, orjson.dumps({"errorMessage": f"unknown verb {verb!r}"}))
            return
        nodes = 0
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body, nodes = self.server.scorer.answer(self.rfile.read(length))
        except (BadRequest, ValueError, KeyError, TypeError, RuntimeError) as error:
            self.server.scorer.metrics.observe(verb, "error", time.perf_counter() - began)
            self._reply(400, orjson.dumps({"nodeScore": None, "errorMessage": str(error)}))
            return
        self._reply(200, body)
        self.server.scorer.metrics.observe(verb, "ok", time.perf_counter() - began, nodes)


class PlacementServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], scorer: Scorer) -> None:
        self.scorer = scorer
        super().__init__(address, Handler)
