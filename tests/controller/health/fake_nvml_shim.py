"""Run `fleetplane` against a fake NVML, for tests that need a real process.

    FLEETPLANE_FAKE_NVML=scenario.json python -m tests.controller.health.fake_nvml_shim health check ...

The scenario is a `FakeNode` as JSON (`FakeNode.to_json`). The shim puts a `FakeNvml` for it in
`sys.modules["pynvml"]` and then runs the `fleetplane` command exactly as installed, so the
command line, the JSON on stdout and the exit status are the production ones; only the binding
differs. Nothing in controller/ reads FLEETPLANE_FAKE_NVML.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

from tests.controller.health.fake_nvml import FakeNode, FakeNvml

SCENARIO_ENV = "FLEETPLANE_FAKE_NVML"


def main() -> None:
    scenario = Path(os.environ[SCENARIO_ENV])
    sys.modules["pynvml"] = FakeNvml(FakeNode.from_json(scenario.read_text()))
    sys.argv[0] = "fleetplane"
    runpy.run_module("fleetplane", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
