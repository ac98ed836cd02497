"""The policy checks a pull request must pass, with the pinned OPA.

    python -m tools.policycheck [--min-coverage 90]

1. `opa fmt --list policies/` prints nothing (every file formatted);
2. `opa check --strict policies/` passes;
3. `opa test policies/ --coverage` passes, and every policy file (tests excluded) is covered
   at least --min-coverage percent.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from tools.localcluster import BIN_DIR, ROOT, ClusterError, require_binaries

POLICIES = ROOT / "policies"


def run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.policycheck",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--min-coverage",
        type=float,
        default=90.0,
        help="minimum coverage per policy file, percent (default: 90)",
    )
    args = parser.parse_args(argv)
    try:
        opa = str(require_binaries(BIN_DIR, ("opa",))["opa"])
    except ClusterError as error:
        print(f"policycheck: {error}", file=sys.stderr)
        return 1
    target = str(POLICIES.relative_to(ROOT))
    failures: list[str] = []

    fmt = run([opa, "fmt", "--list", target])
    if fmt.returncode != 0 or fmt.stdout.strip():
        failures.append(
            f"opa fmt: not formatted (run `opa fmt -w {target}`):\n{fmt.stdout}{fmt.stderr}"
        )

    check = run([opa, "check", "--strict", target])
    if check.returncode != 0:
        failures.append(f"opa check --strict:\n{check.stdout}{check.stderr}")

    # opa test stops a test after 5 s by default; the fast path's contract tests evaluate the
    # gate a few hundred times each, which a loaded 2-core machine can take longer than that.
    timeout = "--timeout=120s"
    tests = run([opa, "test", target, timeout, "--format=json"])
    if tests.returncode != 0:
        verbose = run([opa, "test", target, timeout, "-v"])
        failures.append(f"opa test failed:\n{verbose.stdout[-6000:]}{verbose.stderr[-2000:]}")
    else:
        results = json.loads(tests.stdout)
        print(f"opa test: {len(results)} passed, 0 failed")

    coverage = run([opa, "test", target, timeout, "--coverage", "--format=json"])
    if coverage.returncode == 0:
        report = json.loads(coverage.stdout)
        for path, file_report in sorted(report.get("files", {}).items()):
            if path.endswith("_test.rego"):
                continue
            percent = float(file_report.get("coverage", 0.0))
            print(f"coverage {percent:6.2f}%  {path}")
            if percent < args.min_coverage:
                uncovered = [
                    f"{r['start']['row']}-{r['end']['row']}"
                    for r in file_report.get("not_covered", [])
                ]
                failures.append(
                    f"{path}: coverage {percent:.2f}% < {args.min_coverage}% "
                    f"(uncovered lines {', '.join(uncovered)})"
                )
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    if not failures:
        print("policy checks passed: opa fmt, opa check --strict, opa test with coverage")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
