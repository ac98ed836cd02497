"""An image registry on loopback (Debian's docker-registry, distribution 2.8) for the real node.

containerd pulls `127.0.0.1:PORT/NAME@sha256:...` over plain HTTP from a loopback address with no
extra configuration, so the local stack names its images by digest exactly as a cloud stack
names them in its own registry.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from localfleet.binaries import bin_dir as pinned_bin_dir
from localfleet.servers import _Process, _require

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
class Registry:
    """`registry serve` with filesystem storage under `work_dir`, on a free port of `host`
    (loopback; the real node's registry listens on the host end of the node's veth)."""

    bin_dir: Path = field(default_factory=pinned_bin_dir)
    work_dir: Path | None = None
    port: int = 0
    host: str = "127.0.0.1"
    _process: _Process | None = field(default=None, init=False)

    @property
    def address(self) -> str:
        """host:port, as image references name it."""
        return f"{self.host}:{self.port}"

    def start(self, *, timeout: float = 30.0) -> Registry:
        binaries = _require(self.bin_dir, ("registry",))
        if self.work_dir is None:
            self.work_dir = Path(tempfile.mkdtemp(prefix="fleetplane-registry-"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        storage = self.work_dir / "storage"
        self._process = _Process("registry", self.work_dir / "registry.log")

        def command(port: int) -> list[str]:
            config = self.work_dir / "config.yml"  # type: ignore[operator]
            config.write_text(CONFIG.format(storage=storage, host=self.host, port=port))
            return [str(binaries["registry"]), "serve", str(config)]

        self.port = self._process.serve(
            command, lambda port: f"http://{self.host}:{port}/v2/", self.port, timeout
        )
        return self

    def stop(self) -> None:
        if self._process is not None:
            self._process.stop()

    def log_tail(self) -> str:
        return self._process.log_tail() if self._process else "--- registry: not started"

    def __enter__(self) -> Registry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
