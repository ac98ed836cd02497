"""A stand-in `nvidia-smi` for the GPU-reset path: the flags the reset uses, parsed as
nvidia-smi parses them, the answers and exit codes nvidia-smi(1) documents, and a record of
every call.

Flags: `-i/--id=N`, `--query-gpu=persistence_mode` with `--format=csv,noheader`,
`-pm/--persistence-mode 0|1`, `-r/--gpu-reset`. Exit codes (nvidia-smi(1), RETURN VALUE): 0
success, 2 invalid argument, 4 insufficient permissions (`-pm` and `-r` need root), 6 GPU not
found, 255 other error (the reset of a GPU some process still uses).

State lives in a JSON file named by `FAKE_NVIDIA_SMI_STATE` (`gpus`, `persistence` per index,
`in_use` indexes, `root`); each call appends its argv as one JSON line to `FAKE_NVIDIA_SMI_LOG`.
`install(directory, state, log)` writes an executable `nvidia-smi` into `directory` that runs
this module with the test's Python.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def main(argv: list[str]) -> int:
    state_path = Path(os.environ["FAKE_NVIDIA_SMI_STATE"])
    with Path(os.environ["FAKE_NVIDIA_SMI_LOG"]).open("a") as log:
        log.write(json.dumps(argv) + "\n")
    state = _load(state_path)
    gpu: str | None = None
    query: str | None = None
    fmt: str | None = None
    persistence: str | None = None
    reset = False
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, _, inline = arg.partition("=")
        if name in ("-i", "--id"):
            gpu = inline or (args.pop(0) if args else None)
        elif name == "--query-gpu":
            query = inline
        elif name == "--format":
            fmt = inline
        elif name in ("-pm", "--persistence-mode"):
            persistence = inline or (args.pop(0) if args else None)
        elif name in ("-r", "--gpu-reset"):
            reset = True
        else:
            print(
                f'Invalid combination of input arguments. Please run "nvidia-smi -h" for help.\n{arg}',
                file=sys.stderr,
            )
            return 2
    if gpu is not None and (not gpu.isdigit() or int(gpu) >= int(state["gpus"])):
        print("No devices were found")
        return 6
    indexes = [gpu] if gpu is not None else [str(i) for i in range(int(state["gpus"]))]
    modes: dict[str, bool] = state.setdefault("persistence", {})
    if query is not None:
        if query != "persistence_mode" or fmt != "csv,noheader":
            print(f'Field "{query}" is not a valid field to query.', file=sys.stderr)
            return 2
        for index in indexes:
            print("Enabled" if modes.get(index, False) else "Disabled")
        return 0
    if persistence is not None:
        if persistence not in ("0", "1"):
            print(
                'Invalid combination of input arguments. Please run "nvidia-smi -h" for help.',
                file=sys.stderr,
            )
            return 2
        if not state.get("root", True):
            print("Unable to set persistence mode: Insufficient Permissions")
            return 4
        for index in indexes:
            modes[index] = persistence == "1"
            bus = f"00000000:{0x18 + int(index):02X}:00.0"
            shown = "Enabled" if modes[index] else "Disabled"
            print(f"{shown} persistence mode for GPU {bus}.")
        state_path.write_text(json.dumps(state))
        return 0
    if reset:
        if gpu is None:
            print(
                'Invalid combination of input arguments. Please run "nvidia-smi -h" for help.',
                file=sys.stderr,
            )
            return 2
        if not state.get("root", True):
            print("Unable to reset this GPU: Insufficient Permissions")
            return 4
        bus = f"00000000:{0x18 + int(gpu):02X}:00.0"
        if int(gpu) in state.get("in_use", []):
            print(
                f"GPU {bus} is currently in use by another process.\n\n1 device is currently being used by one or more other processes (e.g., Fabric Manager, CUDA application, graphics application such as an X server, or a monitoring application such as another instance of nvidia-smi). Please first kill all processes using this device and all compute applications running in the system."
            )
            return 255
        state.setdefault("resets", []).append(int(gpu))
        state_path.write_text(json.dumps(state))
        print(f"GPU {bus} was successfully reset.\nAll done.")
        return 0
    print("+-----------------------------------------------------------------------------+")
    return 0


def install(directory: Path, state: dict[str, Any], log: Path) -> dict[str, str]:
    """Put an executable `nvidia-smi` into `directory`; returns the environment that makes it
    the one found (PATH first) and points it at its state and log."""
    directory.mkdir(parents=True, exist_ok=True)
    state_path = directory / "nvidia-smi-state.json"
    state_path.write_text(json.dumps(state))
    log.touch()
    script = directory / "nvidia-smi"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(Path(__file__).resolve().parents[3])!r})\n"
        "from tests.controller.health.fake_nvidia_smi import main\nsys.exit(main(sys.argv[1:]))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return {
        "PATH": f"{directory}{os.pathsep}{os.environ.get('PATH', '')}",
        "FAKE_NVIDIA_SMI_STATE": str(state_path),
        "FAKE_NVIDIA_SMI_LOG": str(log),
    }


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line]


def state_of(env: dict[str, str]) -> dict[str, Any]:
    return _load(Path(env["FAKE_NVIDIA_SMI_STATE"]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
