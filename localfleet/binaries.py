"""Where the pinned upstream binaries are: `tools/bin` of the checkout, filled by
`make tools` (`python -m tools.bootstrap`), else the PATH."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The checkout the local fleet runs from (the local fleet is a checkout-only room)."""
BIN_DIR = ROOT / "tools" / "bin"
BIN_DIR_ENV = "FLEETPLANE_BIN_DIR"


class MissingToolError(RuntimeError):
    """A pinned tool is not where it should be; the message says how to obtain it."""


def bin_dir() -> Path:
    """$FLEETPLANE_BIN_DIR, else the checkout's tools/bin."""
    explicit = os.environ.get(BIN_DIR_ENV)
    return Path(explicit) if explicit else BIN_DIR


def require_binaries(directory: Path, names: tuple[str, ...]) -> dict[str, Path]:
    """Each of `names` in `directory`; MissingToolError naming the missing ones."""
    missing = [name for name in names if not (directory / name).exists()]
    if missing:
        raise MissingToolError(
            f"missing tool(s) {', '.join(missing)} in {directory}: run `make tools` "
            "(or `python -m tools.bootstrap`) first"
        )
    return {name: directory / name for name in names}


def find_binary(name: str, explicit: str | Path | None = None) -> Path:
    """`explicit` if given, else the pinned one in tools/bin, else `name` on the PATH."""
    if explicit:
        path = Path(explicit)
        if not path.exists():
            raise MissingToolError(f"no {name} at {path}")
        return path
    pinned = bin_dir() / name
    if pinned.exists():
        return pinned
    found = shutil.which(name)
    if found:
        return Path(found)
    raise MissingToolError(
        f"{name} not found in {bin_dir()} nor on the PATH: run `make tools` in a checkout, "
        f"or install {name} and put it on the PATH"
    )
