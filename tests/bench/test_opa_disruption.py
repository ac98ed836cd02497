"""bench/opa_disruption.py runs end to end against the real OPA as the gate runs it (briefly,
figures unchecked for speed): every input shape reports, the whole and slim inputs got the
same answer for every pod, and the policy's answers are the recorded ones (a rewrite of the
rules for speed answers as before); an answer that differs from the record fails it."""

from __future__ import annotations

import importlib.util
import json
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
    assert "answers of the first 240 pods equal to opa_disruption_answers.json" in out


def test_an_answer_unlike_the_recorded_one_fails_the_bench(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bench = load_bench(monkeypatch)
    recorded = json.loads(bench.ANSWERS.read_text())
    assert len(recorded["answers"]) == 240
    recorded["answers"]["7"]["reasons"] = ["running 300s, short of the 20s minimum runtime"]
    changed = tmp_path / "answers.json"
    changed.write_text(json.dumps(recorded))
    monkeypatch.setattr(bench, "ANSWERS", changed)
    code = bench.main(["--pods", "16", "--rounds", "1", "--batch", "8"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "answers differ from answers.json: pods ['7']" in out
