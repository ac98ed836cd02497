"""The placement service as a process of the local fleet (`python -m placement` with this
virtual environment's Python), under the one supervisor like the upstream servers: attached in
tests and benchmarks, detached by `fleetplane up` when the stack's `volcano.placement` is fgd
with a loopback `placement_url` (the shipped local stack's, where fgd is then the default). The local Volcano's scheduler then calls it as the cluster's
calls the Service. It runs this interpreter, so the checkout's (PYTHONPATH) or the installed
package's service."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import ClassVar

from fleet.placement import HEALTH_PATH
from localfleet.servers import Server


@dataclass
class PlacementServer(Server):
    """`recent_pods`: tasks of the cluster's own to learn the workload from (0: the shipped
    seed alone, as the replay's model has it)."""

    NAME: ClassVar[str] = "placement"
    recent_pods: int | None = None

    def start(self, *, timeout: float = 30.0) -> PlacementServer:
        self._work()
        learn = [] if self.recent_pods is None else [f"--recent-pods={self.recent_pods}"]
        self._serve(
            lambda port: [
                sys.executable,
                "-m",
                "placement",
                f"--host={self.host}",
                f"--port={port}",
                *learn,
            ],
            HEALTH_PATH,
            timeout,
        )
        return self

    def __enter__(self) -> PlacementServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
