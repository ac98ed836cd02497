"""What the validator pod runs: `python -m controller.upgrade.validate <health check options>`.

Runs `python -m controller.health check <options>` as a child process, copies its output (the
full JSON verdict) to stdout so the pod's log keeps it, writes the compact verdict
(`validator.termination_message`) to the termination-message file, and exits with the check's
exit status. When the check printed no verdict, nothing is written and the exit status still
says what happened (the kubelet then falls back to the log tail, as the pod asks).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import orjson

from controller.upgrade.validator import termination_message

TERMINATION_LOG = Path(os.environ.get("TERMINATION_MESSAGE_PATH", "/dev/termination-log"))


def main(argv: Sequence[str] | None = None, *, termination_log: Path = TERMINATION_LOG) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    result = subprocess.run(
        [sys.executable, "-m", "controller.health", "check", *args],
        stdout=subprocess.PIPE,
        check=False,
    )
    sys.stdout.buffer.write(result.stdout)
    sys.stdout.flush()
    try:
        document = orjson.loads(result.stdout)
    except orjson.JSONDecodeError:
        return result.returncode
    if isinstance(document, dict):
        try:
            termination_log.write_text(termination_message(document))
        except OSError as error:
            print(f"cannot write {termination_log}: {error}", file=sys.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
