"""One upstream tool: its pinned version, the binaries it provides, how it is obtained, and the
per-user cache folder keyed by a hash of its recipe; and running one step of a recipe."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
GO_DIR = ROOT / "tools" / "go"
BIN_DIR = ROOT / "tools" / "bin"


def cache_root() -> Path:
    explicit = os.environ.get("FLEETPLANE_TOOLS_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fleetplane" / "tools"


class BootstrapError(RuntimeError):
    """A tool could not be obtained; the message names the tool and the cause."""


@dataclass(frozen=True, kw_only=True)
class Tool:
    """One upstream tool: how to obtain it and which binaries it provides."""

    name: str
    version: str
    binaries: tuple[str, ...]
    obtain: Callable[[Tool, Path], None]
    recipe: tuple[Path, ...] = field(default=())
    extra_key: str = ""

    def cache_dir(self) -> Path:
        digest = hashlib.sha256(self.extra_key.encode())
        for path in self.recipe:
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
        return cache_root() / f"{self.name}-{self.version}-{digest.hexdigest()[:12]}"

    def is_cached(self) -> bool:
        directory = self.cache_dir()
        return all((directory / binary).is_file() for binary in self.binaries)


def run(tool: Tool, cmd: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> None:
    with tempfile.TemporaryFile(mode="w+") as log:
        result = subprocess.run(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        if result.returncode != 0:
            log.seek(0)
            tail = "".join(log.readlines()[-25:])
            raise BootstrapError(
                f"could not obtain {tool.name} {tool.version}: `{' '.join(cmd)}` exited "
                f"{result.returncode}\n{tail}"
            )
