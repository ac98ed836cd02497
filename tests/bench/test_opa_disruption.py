"""bench/opa_disruption.py runs end to end against the real OPA as the gate runs it (briefly,
figures unchecked for speed): every input shape reports, and the whole and slim inputs got the
same answer for every pod."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent

pytestmark = pytest.mark.integration


def load_bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    # the bench imports its sibling fleet_setup, as when run as a script
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(
        "opa_disruption", ROOT / "bench" / "opa_disruption.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_every_input_reports_and_the_answers_are_equal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = load_bench(monkeypatch)
    code = bench.main(["--pods", "240", "--rounds", "1", "--batch", "50"])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = {line.split()[0] for line in out.splitlines() if line.split()}
    assert {"whole", "slim", "with", "floor"} <= rows
    assert "240 judged pods of 240" in out
    assert "answers equal for every pod, whole and slim" in out
