"""bench/opa_admission.py runs end to end against the real OPA (briefly, figures unchecked for
speed): every phase reports, every request got an AdmissionReview answer."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent

pytestmark = pytest.mark.integration


def load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "opa_admission", ROOT / "bench" / "opa_admission.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def run(capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    bench = load_bench()
    short = ["--seconds", "0.5", "--warmup", "0.1", "--trace-limit", "20"]
    code = bench.main([*short, "--rate", "100", "--eval-samples", "20", "--json", *extra])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_every_phase_reports_including_the_floor(capsys: pytest.CaptureFixture[str]) -> None:
    figures = run(capsys)
    assert figures["throughput"]["requests"] > 0
    for phase in ("at_rate", "floor"):
        r = figures[phase]
        assert r["rate"] == 100
        # The phase sent requests and timed every answer. How close `achieved` comes to the
        # rate is a speed figure the bench prints, not something a test may assert: on a loaded
        # machine the client itself falls behind.
        assert r["achieved"] > 0
        assert 0 < r["p50_ms"] <= r["p99_ms"] <= r["max_ms"]
        assert r["opa_cpu_us_per_decision"] > 0
    allowed, denied = figures["fast_path_share"]
    assert allowed > 0
    assert denied > 0
    assert allowed + denied <= 1


def test_no_floor_skips_it(capsys: pytest.CaptureFixture[str]) -> None:
    figures = run(capsys, "--no-floor")
    assert "at_rate" in figures
    assert "floor" not in figures


def test_reading_runs_the_fast_paths_reading_alone(capsys: pytest.CaptureFixture[str]) -> None:
    # The reading phase serves the project's policies under another entry point: if
    # fast_base were renamed or broken, that OPA would not start and the bench would fail.
    figures = run(capsys, "--no-floor", "--reading")
    r = figures["reading"]
    assert r["rate"] == 100
    assert r["achieved"] > 0
    assert r["opa_cpu_us_per_decision"] > 0
    assert "floor" not in figures
