"""The guard of tests/conftest.py: a test that starts a pinned tool carries the integration
marker, or fails naming the tool, so that `make test-fast` passes with no tools obtained."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def pinned_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A program in the pinned tools' folder (FLEETPLANE_BIN_DIR, as `make tools` would fill)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    tool = folder / "opa"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    monkeypatch.setenv("FLEETPLANE_BIN_DIR", str(folder))
    return tool


def test_an_unmarked_test_that_starts_a_pinned_tool_fails_naming_it(pinned_tool: Path) -> None:
    with pytest.raises(pytest.fail.Exception, match=f"starts {pinned_tool} without the integ"):
        subprocess.run([str(pinned_tool), "version"], check=True)
    with pytest.raises(pytest.fail.Exception, match="without the integration marker"):
        subprocess.run(f"{pinned_tool} version", shell=True, executable=str(pinned_tool))


def test_an_unmarked_test_may_start_other_programs(pinned_tool: Path) -> None:
    assert subprocess.run([sys.executable, "-c", "pass"], check=True).returncode == 0


@pytest.mark.integration
def test_a_marked_test_may_start_a_pinned_tool(pinned_tool: Path) -> None:
    assert subprocess.run([str(pinned_tool), "version"], check=True).returncode == 0
