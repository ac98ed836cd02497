"""How the local fleet starts its servers: one launcher for every child process (the control
plane's components, OPA, Prometheus, the stack's services)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path


def spawn(
    cmd: list[str],
    log_path: Path,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start `cmd` in a session of its own (so it can outlive this process and be stopped as a
    group), stdin closed, stdout and stderr appended to `log_path`; `env` adds to ours."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=cwd,
            env=None if env is None else {**os.environ, **env},
        )
