"""The bench scripts that need no servers: they run, and what they print rests on sound figures
(no timing is asserted). bench/opa_admission.py has its own smoke test; bench/controller_pass.py
needs a whole fleet and is exercised only by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import replay_compare, replay_default_trace, upgrade_rollout


@pytest.mark.parametrize("job_fraction", [0.0, 0.3])
def test_rollout_finishes_within_max_unavailable(job_fraction: float) -> None:
    result = upgrade_rollout.simulate(40, "10%", 4, job_fraction=job_fraction, seed=1)
    assert result["max_unavailable"] == "10% = 4"
    # Never more nodes out than the pool allows, and no faster than the bound says is possible.
    assert 0 < result["peak_unavailable"] <= 4
    assert result["passes"] >= result["lower_bound_passes"]
    assert result["waves"] >= result["lower_bound_waves"] == 10


def test_rollout_prints_both_job_fractions(capsys: pytest.CaptureFixture[str]) -> None:
    assert upgrade_rollout.main(["--nodes", "20", "--job-fraction", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "nodes with a running job 0%" in out
    assert "nodes with a running job 50%" in out


def test_compare_ignores_speed_and_names_what_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = {"throughput": {"wall_seconds": 10}, "scenarios": [{"name": "a", "bill": 100}]}
    faster = {"throughput": {"wall_seconds": 5}, "scenarios": [{"name": "a", "bill": 100}]}
    changed = {"throughput": {"wall_seconds": 5}, "scenarios": [{"name": "a", "bill": 101}]}
    paths = []
    for name, document in (("before", before), ("faster", faster), ("changed", changed)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(document))
        paths.append(str(path))
    assert replay_compare.main([paths[0], paths[1]]) == 0
    assert "every figure is the same" in capsys.readouterr().out
    assert replay_compare.main([paths[0], paths[2]]) == 1
    assert "scenarios[0].bill: 100 -> 101" in capsys.readouterr().out


def test_replay_bench_reports_an_unknown_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert replay_default_trace.main(["--scenario", "no-such-scenario", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "no scenario no-such-scenario" in err
    assert "known: fixed" in err
