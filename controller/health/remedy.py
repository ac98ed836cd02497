"""What the remedy pods run (controller/remediation/remedy_pods.py): a GPU reset through
`nvidia-smi`, and a reboot of the host through systemd.

`fleetplane health reset --gpu N [--gpu M ...]`, per GPU, as NVIDIA's own reset Job does it
(NVSentinel's Janitor): read the persistence mode, turn it off (`nvidia-smi -i N -pm 0`; a GPU in
persistence mode is held open by the driver and refuses a reset), `nvidia-smi --gpu-reset -i N`,
and turn persistence mode back on when it was on. The health check after the reset is the
validator pod's (the `validating` state), not this command's.

`fleetplane health reboot` sends PID 1 of the host (the pod shares its PID namespace) systemd's
reboot signal, SIGRTMIN+5 (systemd(1): "starts the reboot.target unit"), so services stop in
order; it refuses, changing nothing, when PID 1 is not systemd.

Both print a JSON result and write it to the termination-message file (the controller reads it
back from the pod's status); exit 0 done, 1 the remedy failed, 2 it could not run (no
`nvidia-smi`, PID 1 not systemd).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NVIDIA_SMI_EXIT = {
    0: "success",
    2: "invalid argument or flag",
    3: "operation not available on this device",
    4: "insufficient permissions",
    6: "GPU not found",
    9: "NVIDIA driver not loaded",
    12: "NVML shared library not found",
    15: "GPU fell off the bus or is inaccessible",
    255: "other error or internal driver error",
}
"""nvidia-smi's return values (nvidia-smi(1), RETURN VALUE)."""

TERMINATION_LOG = Path(os.environ.get("TERMINATION_MESSAGE_PATH", "/dev/termination-log"))

Runner = Callable[[list[str]], subprocess.CompletedProcess[str]]


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)


@dataclass
class ResetResult:
    gpus: dict[str, dict[str, Any]] = field(default_factory=dict)
    exit_code: int = 0

    def document(self, node: str) -> dict[str, Any]:
        return {
            "remedy": "gpu-reset",
            "node": node,
            "ok": self.exit_code == 0,
            "exit_code": self.exit_code,
            "gpus": self.gpus,
        }


def _said(done: subprocess.CompletedProcess[str]) -> str:
    text = (done.stdout + done.stderr).strip()
    meaning = NVIDIA_SMI_EXIT.get(done.returncode, f"exit {done.returncode}")
    return f"{meaning}: {text[:300]}" if text else meaning


def reset_gpus(gpus: Sequence[str], *, nvidia_smi: str, run: Runner = _run) -> ResetResult:
    """Reset each GPU in turn; the first failure ends the command (exit 1; the node escalates
    to a reboot, which resets them all)."""
    result = ResetResult()
    for gpu in gpus:
        record: dict[str, Any] = {}
        result.gpus[gpu] = record
        query = run(
            [nvidia_smi, "-i", gpu, "--query-gpu=persistence_mode", "--format=csv,noheader"]
        )
        if query.returncode != 0:
            record["error"] = f"reading persistence mode: {_said(query)}"
            result.exit_code = 1
            return result
        persistent = query.stdout.strip().lower() == "enabled"
        record["persistence_mode"] = "enabled" if persistent else "disabled"
        if persistent:
            off = run([nvidia_smi, "-i", gpu, "-pm", "0"])
            if off.returncode != 0:
                record["error"] = f"turning persistence mode off: {_said(off)}"
                result.exit_code = 1
                return result
        reset = run([nvidia_smi, "--gpu-reset", "-i", gpu])
        record["reset"] = _said(reset)
        if persistent:
            on = run([nvidia_smi, "-i", gpu, "-pm", "1"])
            record["persistence_mode_restored"] = on.returncode == 0
        if reset.returncode != 0:
            result.exit_code = 1
            return result
    return result


def write_result(document: dict[str, Any], termination_log: Path) -> None:
    text = json.dumps(document, sort_keys=True)
    print(text)
    try:
        termination_log.write_text(text[-4096:])
    except OSError as error:
        print(f"cannot write {termination_log}: {error}", file=sys.stderr)


def run_reset(
    gpus: Sequence[str],
    *,
    node: str,
    termination_log: Path = TERMINATION_LOG,
    run: Runner = _run,
) -> int:
    nvidia_smi = shutil.which("nvidia-smi")
    if nvidia_smi is None:
        write_result(
            {
                "remedy": "gpu-reset",
                "node": node,
                "ok": False,
                "exit_code": 2,
                "error": "nvidia-smi is not in the container: run it with the NVIDIA runtime "
                "and NVIDIA_DRIVER_CAPABILITIES=utility",
            },
            termination_log,
        )
        return 2
    result = reset_gpus(gpus, nvidia_smi=nvidia_smi, run=run)
    write_result(result.document(node), termination_log)
    return result.exit_code


REBOOT_SIGNAL = signal.SIGRTMIN + 5
"""systemd's "reboot" signal (systemd(1)); kured's default `--reboot-signal`."""


def run_reboot(
    *,
    node: str,
    proc: Path = Path("/proc"),
    kill: Callable[[int, int], None] = os.kill,
    termination_log: Path = TERMINATION_LOG,
) -> int:
    try:
        init = (proc / "1" / "comm").read_text().strip()
    except OSError as error:
        init = f"unreadable ({error})"
    document: dict[str, Any] = {"remedy": "reboot", "node": node, "init": init}
    if init != "systemd":
        document.update(
            ok=False,
            exit_code=2,
            error=f"PID 1 is {init!r}, not systemd: not rebooting (the pod needs hostPID, "
            "and the host systemd)",
        )
        write_result(document, termination_log)
        return 2
    document.update(ok=True, exit_code=0, signal=int(REBOOT_SIGNAL))
    write_result(document, termination_log)
    kill(1, int(REBOOT_SIGNAL))
    return 0
