"""`python -m tools.bootstrap`: obtain the selected tools into the cache and link them into
tools/bin, or list what is pinned and cached."""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tools.bootstrap.pins import pinned_tools
from tools.bootstrap.tool import BIN_DIR, BootstrapError, Tool


def obtain(tool: Tool, *, log: Callable[[str], None]) -> Path:
    """Make the tool's binaries available in its cache dir and link them into tools/bin."""
    directory = tool.cache_dir()
    if tool.is_cached():
        log(f"{tool.name} {tool.version}: cached ({directory})")
    else:
        log(f"{tool.name} {tool.version}: obtaining (a cold build can take several minutes)...")
        started = time.monotonic()
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{tool.name}-", dir=directory.parent))
        try:
            tool.obtain(tool, staging)
            missing = [b for b in tool.binaries if not (staging / b).exists()]
            if missing:
                raise BootstrapError(
                    f"could not obtain {tool.name}: no {', '.join(missing)} produced"
                )
            if directory.exists():
                shutil.rmtree(directory)
            staging.rename(directory)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        log(f"{tool.name} {tool.version}: ready in {time.monotonic() - started:.0f}s")
    for binary in tool.binaries:
        link = BIN_DIR / binary
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(directory / binary)
    return directory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.bootstrap",
        description="Obtain the pinned upstream tools (OPA, etcd, Kubernetes, KWOK, Pulumi, "
        "Volcano, Prometheus, containerd and friends) into tools/bin, reusing the per-user cache.",
    )
    parser.add_argument("tools", nargs="*", help="only these tools (default: all)")
    parser.add_argument("--list", action="store_true", help="show pins and cache state, do nothing")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(f"[bootstrap] {message}", flush=True)

    try:
        tools = pinned_tools()
    except BootstrapError as error:
        log(str(error))
        return 1
    known = {tool.name for tool in tools}
    unknown = sorted(set(args.tools) - known)
    if unknown:
        parser.error(f"unknown tool(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    selected = [tool for tool in tools if not args.tools or tool.name in args.tools]
    if args.list:
        for tool in selected:
            state = "cached" if tool.is_cached() else "missing"
            print(f"{tool.name:26} {tool.version:10} {state:8} {tool.cache_dir()}")
        return 0
    started = time.monotonic()
    for tool in selected:
        try:
            obtain(tool, log=log)
        except BootstrapError as error:
            log(f"FAILED: {error}")
            return 1
    log(f"all tools ready in {time.monotonic() - started:.0f}s: {BIN_DIR}")
    return 0
