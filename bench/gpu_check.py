"""Check the GPU path on this machine in one command: what the validator pod runs, read back the
way the controller reads it.

    python -m bench.gpu_check [--expect-driver 570.124.06] [--expect-gpus 8]
                              [--max-temperature-c 85] [--xid-wait-seconds 2]

Runs `fleetplane controller upgrade validate` (the validator pod's command: the NVML health check
of `controller/health` in a child process, its compact verdict written to a termination-message
file) and judges that verdict with `controller.nodeflow.validator.read_verdict`, exactly as an
upgrade or a remediation would. Without `--expect-driver` / `--expect-gpus` the check expects what
NVML itself reports here (the driver loaded and every GPU enumerated), so on a GPU machine it
proves NVML, every device handle, ECC, retired pages, row remapping, temperature and the Xid event
watch work through `nvidia-ml-py`.

Prints one JSON object: `result` (`healthy`, `unhealthy`, `no-driver` or `unavailable`),
`reason` in words, `expected`, and the health check's full `verdict`. Exit status: 0 healthy,
1 unhealthy or no NVIDIA driver, 2 could not check. On a machine without an NVIDIA driver it
says "no NVIDIA driver" and exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

from controller.nodeflow.pods import Terminated
from controller.nodeflow.validator import HEALTHY, NO_DRIVER, UNHEALTHY, read_verdict

UNKNOWN_DRIVER = "unknown"


def discover() -> tuple[str, int]:
    """The driver version and GPU count NVML reports here; (`unknown`, 1) when NVML cannot say
    (the check itself then reports why)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return UNKNOWN_DRIVER, 1
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        count = pynvml.nvmlDeviceGetCount()
        return (driver.decode() if isinstance(driver, bytes) else str(driver)), max(count, 1)
    except Exception:
        return UNKNOWN_DRIVER, 1
    finally:
        with contextlib.suppress(Exception):  # a failed shutdown changes nothing here
            pynvml.nvmlShutdown()


def check(args: argparse.Namespace) -> tuple[int, dict[str, Any]]:
    """Run the validator's command and judge its verdict; (exit status, printed document)."""
    found_driver, found_gpus = discover()
    driver = args.expect_driver or found_driver
    gpus = args.expect_gpus or found_gpus
    options = ["--expect-driver", driver, "--expect-gpus", str(gpus)]
    if args.max_temperature_c is not None:
        options += ["--max-temperature-c", str(args.max_temperature_c)]
    if args.xid_wait_seconds is not None:
        options += ["--xid-wait-seconds", f"{args.xid_wait_seconds:g}"]
    with tempfile.TemporaryDirectory() as scratch:
        termination = Path(scratch) / "termination-log"
        done = subprocess.run(
            [sys.executable, "-m", "fleetplane", "controller", "upgrade", "validate", *options],
            capture_output=True,
            env={**os.environ, "TERMINATION_MESSAGE_PATH": str(termination)},
            check=False,
        )
        message = termination.read_text() if termination.exists() else ""
    try:
        verdict = orjson.loads(done.stdout)
    except orjson.JSONDecodeError:
        verdict = {"stdout": done.stdout.decode(errors="replace")[-2000:]}
    outcome = read_verdict(
        Terminated(exit_code=done.returncode, message=message, reason=""),
        target=driver,
        gpus=gpus,
    )
    no_driver = isinstance(verdict, dict) and verdict.get("reason") == NO_DRIVER
    result = NO_DRIVER if no_driver else outcome.kind
    document = {
        "result": result,
        "reason": outcome.reason,
        "expected": {"driver_version": driver, "gpu_count": gpus},
        "verdict": verdict,
        "stderr": done.stderr.decode(errors="replace")[-2000:],
    }
    if outcome.kind == HEALTHY:
        return 0, document
    return (1 if outcome.kind == UNHEALTHY else 2), document


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_check", description=__doc__)
    parser.add_argument("--expect-driver", help="driver version (default: the one NVML reports)")
    parser.add_argument("--expect-gpus", type=int, help="GPUs (default: the count NVML reports)")
    parser.add_argument("--max-temperature-c", type=float)
    parser.add_argument("--xid-wait-seconds", type=float)
    args = parser.parse_args(argv)
    code, document = check(args)
    sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
    print(f"gpu check: {document['result']}: {document['reason']}", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
