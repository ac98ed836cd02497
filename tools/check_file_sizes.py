"""A product Python file stays under `LIMIT` lines; `make lint` fails on one that does not.

Files grow in place when a feature lands beside its nearest neighbour; past the limit, the file
is split by concern (as `fleet/config/` and `controller/decide/preempt/` were) rather than the
limit raised. Product is every room import-linter checks (`root_packages` in pyproject.toml, so
a new room is covered when it gets its contract) and `stacks/`, the Pulumi program. The one
exception is generated code (`GENERATED`), which nobody edits by hand.

    python -m tools.check_file_sizes              # the project this file is in
    python -m tools.check_file_sizes --root DIR   # another checkout
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

LIMIT = 700
"""Most lines a product Python file may have."""

GENERATED = ("controller/observe/k8s_pb/*_pb2.py",)
"""Generated code, exempt: the protobuf modules tools/k8sproto.py writes."""

EXTRA_ROOMS = ("stacks",)
"""Product folders that are no import package import-linter checks."""

SKIPPED_FOLDERS = ("tools/bin",)
"""Folders under a room that hold no source of the project (links to the tools' cache)."""


@dataclass(frozen=True, kw_only=True)
class Oversized:
    path: str
    lines: int
    limit: int

    def __str__(self) -> str:
        return f"{self.path}: {self.lines} lines (limit {self.limit}): split it by concern"


def rooms(root: Path) -> list[str]:
    """The product's top-level folders: import-linter's root packages, then `EXTRA_ROOMS`."""
    with (root / "pyproject.toml").open("rb") as file:
        project = tomllib.load(file)
    packages = project["tool"]["importlinter"]["root_packages"]
    return list(dict.fromkeys([*packages, *EXTRA_ROOMS]))


def product_files(root: Path) -> list[str]:
    """Every product Python file, relative to `root` with forward slashes, sorted."""
    found: list[str] = []
    for room in rooms(root):
        for folder, subfolders, files in os.walk(root / room):
            relative_folder = Path(folder).relative_to(root).as_posix()
            subfolders[:] = [
                name
                for name in subfolders
                if not name.startswith(".")
                and name != "__pycache__"
                and f"{relative_folder}/{name}" not in SKIPPED_FOLDERS
            ]
            found += [f"{relative_folder}/{name}" for name in files if name.endswith(".py")]
    return sorted(found)


def is_generated(path: str) -> bool:
    return any(fnmatch.fnmatch(path, pattern) for pattern in GENERATED)


def oversized(root: Path, limit: int = LIMIT) -> list[Oversized]:
    """The product files over `limit` lines, generated code aside."""
    out: list[Oversized] = []
    for path in product_files(root):
        if is_generated(path):
            continue
        lines = len((root / path).read_text(encoding="utf-8").splitlines())
        if lines > limit:
            out.append(Oversized(path=path, lines=lines, limit=limit))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.check_file_sizes",
        description=f"Fail when a product Python file has more than {LIMIT} lines "
        "(generated code aside).",
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(__file__).resolve().parent.parent,
        help="the project's folder (default: the one this file is in)",
    )
    args = parser.parse_args(argv)
    found = oversized(args.root)
    for file in found:
        print(file, file=sys.stderr)
    if found:
        print(
            f"{len(found)} product file(s) over {LIMIT} lines; generated code is the one "
            f"exception ({', '.join(GENERATED)})",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
