"""An image registry on loopback (Debian's docker-registry, distribution 2.8) for the real node.

containerd pulls `127.0.0.1:PORT/NAME@sha256:...` over plain HTTP from a loopback address with no
extra configuration, so the local stack names its images by digest exactly as a cloud stack
names them in its own registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from localfleet.servers import Server

CONFIG = """\
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: {storage}
  delete:
    enabled: true
http:
  addr: {host}:{port}
"""


@dataclass
class Registry(Server):
    """`registry serve` with filesystem storage under `work_dir`, on a free port of `host`
    (loopback; the real node's registry listens on the host end of the node's veth)."""

    NAME: ClassVar[str] = "registry"

    def start(self, *, timeout: float = 30.0) -> Registry:
        binaries = self._binaries("registry")
        work = self._work()
        storage = work / "storage"

        def command(port: int) -> list[str]:
            config = work / "config.yml"
            config.write_text(CONFIG.format(storage=storage, host=self.host, port=port))
            return [str(binaries["registry"]), "serve", str(config)]

        self._serve(command, "/v2/", timeout)
        return self

    def __enter__(self) -> Registry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
