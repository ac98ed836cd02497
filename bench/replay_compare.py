"""Compare the figures of two replays (figures.json from `--out`, or the `--json` output of
bench/replay_default_trace.py), ignoring only how fast they ran: a speed change must leave every figure
as it was for the same trace, scenarios and seed.

    python bench/replay_compare.py BEFORE.json AFTER.json

Prints each figure that differs (path, before, after) and exits 1 if any does.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

IGNORED = {"throughput", "scenarios_file"}
"""Keys (at any depth) that hold speed, or where the scenario file was read from."""


def differences(before: Any, after: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after)):
            if key in IGNORED:
                continue
            where = f"{path}.{key}" if path else str(key)
            if key not in before or key not in after:
                yield where, before.get(key, "<absent>"), after.get(key, "<absent>")
            else:
                yield from differences(before[key], after[key], where)
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            yield from differences(b, a, f"{path}[{i}]")
    elif before != after:
        yield path, before, after


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    before, after = (json.loads(Path(a).read_text()) for a in args)
    found = list(differences(before, after))
    for where, b, a in found[:200]:
        print(f"{where}: {str(b)[:120]} -> {str(a)[:120]}")
    print(f"{len(found)} figure(s) differ" if found else "every figure is the same")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
