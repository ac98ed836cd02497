"""The policy checks a pull request must pass, with the pinned OPA.

    fleetplane policy test [--min-coverage 90]

1. `opa fmt --list policies/` prints nothing (every file formatted);
2. `opa check --strict policies/` passes;
3. `opa test policies/ --coverage` passes, and every policy file (tests excluded) is covered
   at least --min-coverage percent.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path


def check_policies(
    opa: Path, policies: Path, *, min_coverage: float, say: Callable[[str], None]
) -> list[str]:
    """Run every check on `policies`; the failures, each a paragraph (empty: all passed)."""

    def run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cmd, capture_output=True, text=True, cwd=policies.parent)

    target = policies.name
    failures: list[str] = []
    fmt = run([str(opa), "fmt", "--list", target])
    if fmt.returncode != 0 or fmt.stdout.strip():
        failures.append(
            f"opa fmt: not formatted (run `opa fmt -w {target}`):\n{fmt.stdout}{fmt.stderr}"
        )

    check = run([str(opa), "check", "--strict", target])
    if check.returncode != 0:
        failures.append(f"opa check --strict:\n{check.stdout}{check.stderr}")

    # opa test stops a test after 5 s by default; the fast path's contract tests evaluate the
    # gate a few hundred times each, which a loaded 2-core machine can take longer than that.
    timeout = "--timeout=120s"
    tests = run([str(opa), "test", target, timeout, "--format=json"])
    if tests.returncode != 0:
        verbose = run([str(opa), "test", target, timeout, "-v"])
        failures.append(f"opa test failed:\n{verbose.stdout[-6000:]}{verbose.stderr[-2000:]}")
    else:
        results = json.loads(tests.stdout)
        say(f"opa test: {len(results)} passed, 0 failed")

    coverage = run([str(opa), "test", target, timeout, "--coverage", "--format=json"])
    if coverage.returncode == 0:
        report = json.loads(coverage.stdout)
        for path, file_report in sorted(report.get("files", {}).items()):
            if path.endswith("_test.rego"):
                continue
            percent = float(file_report.get("coverage", 0.0))
            say(f"coverage {percent:6.2f}%  {path}")
            if percent < min_coverage:
                uncovered = [
                    f"{r['start']['row']}-{r['end']['row']}"
                    for r in file_report.get("not_covered", [])
                ]
                failures.append(
                    f"{path}: coverage {percent:.2f}% < {min_coverage}% "
                    f"(uncovered lines {', '.join(uncovered)})"
                )
    return failures
