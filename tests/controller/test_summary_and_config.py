"""Unit tests of the pass summary (Prometheus exposition) and the configuration view."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.config import ConfigProblems, Settings, parse_config
from controller.summary import Summary
from tests.controller.builders import assert_same, config_document, fleet


def test_exposition_is_prometheus_text_with_help_and_type(tmp_path: Path) -> None:
    summary = Summary(dry_run=True)
    summary.action("idle", "warn", "done")
    summary.action("idle", "warn", "done")
    summary.set("team_spend_usd", 12.5, team='re"search')
    summary.finish(api_requests=7)
    text = summary.exposition()
    assert "# HELP fleetplane_controller_actions " in text
    assert "# TYPE fleetplane_controller_actions gauge" in text
    assert 'fleetplane_controller_actions{action="warn",concern="idle",outcome="done"} 2' in text
    assert 'fleetplane_controller_team_spend_usd{team="re\\"search"} 12.5' in text
    assert "fleetplane_controller_api_requests 7" in text
    assert "fleetplane_controller_dry_run 1" in text
    target = tmp_path / "out" / "controller.prom"
    summary.write_textfile(target)
    assert target.read_text() == text
    assert [p.name for p in target.parent.iterdir()] == ["controller.prom"]


def test_config_view_finds_models_and_teams() -> None:
    view = fleet()
    assert view.team_of("ml-research") is not None
    assert view.team_of("nowhere") is None
    model = view.model_of_node({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"})
    assert model is not None and model.name == "a100-40gb"
    assert view.workload_types["inference"].idle is None


def test_config_problems_are_collected_with_their_paths() -> None:
    document = config_document()
    document["teams"]["research"]["monthly_budget_usd"] = "a lot"
    document["workload_types"]["batch"]["idle"] = {
        "util_threshold_percent": 5,
        "window_seconds": 0,
        "grace_seconds": 1,
    }
    document["namespaces"]["stray"] = "ghosts"
    del document["budget"]
    with pytest.raises(ConfigProblems) as caught:
        parse_config(document)
    assert_same(
        [
            "budget: must be an object",
            "namespaces.stray: unknown team 'ghosts'",
            "teams.research.monthly_budget_usd: must be a number",
            "workload_types.batch.idle.window_seconds: must be positive",
        ],
        sorted(caught.value.problems),
    )


def test_an_idle_grace_longer_than_the_window_is_a_problem() -> None:
    """A warning counts only inside one window (decide.idle): with a longer grace the pod is
    warned again every window and never reclaimed."""
    document = config_document()
    document["workload_types"]["batch"]["idle"] = {
        "util_threshold_percent": 5,
        "window_seconds": 600,
        "grace_seconds": 1800,
    }
    with pytest.raises(ConfigProblems) as caught:
        parse_config(document)
    assert caught.value.problems == [
        "workload_types.batch.idle.grace_seconds: 1800s is longer than idle.window_seconds"
        " (600s): a warning counts only inside one window, so the pod would be warned again every"
        " window and never reclaimed; make grace_seconds at most window_seconds"
    ]
    document["workload_types"]["batch"]["idle"]["grace_seconds"] = 600
    idle = parse_config(document).workload_types["batch"].idle
    assert idle is not None and idle.grace_seconds == idle.window_seconds == 600


def test_settings_take_the_controller_section_and_command_line_overrides() -> None:
    view = fleet()
    settings = Settings.from_config(view, opa_url="http://opa:8181", dry_run=None)
    assert settings.opa_url == "http://opa:8181"
    assert settings.prometheus_url == "http://127.0.0.1:9"
    assert settings.dry_run is False
    assert settings.preemption_pending_seconds == 600
    with pytest.raises(ConfigProblems):
        Settings.from_config(fleet(lambda doc: doc.pop("controller")))


def test_spend_goes_to_the_opa_service_replicas_unless_the_command_line_names_an_opa() -> None:
    in_cluster = fleet(lambda doc: doc["controller"].update(opa_service="fleetplane-system/opa"))
    assert Settings.from_config(in_cluster).opa_service == "fleetplane-system/opa"
    # Another OPA given on the command line (e.g. a port-forward) is the only one written.
    assert Settings.from_config(in_cluster, opa_url="http://127.0.0.1:8181").opa_service is None
    assert Settings.from_config(fleet()).opa_service is None


def test_evidence_queries_get_their_own_longer_timeout() -> None:
    assert Settings.from_config(fleet()).query_timeout_seconds == 60
    view = fleet(lambda doc: doc["controller"].update(query_timeout_seconds=90))
    assert Settings.from_config(view).query_timeout_seconds == 90


def test_peak_memory_is_this_programs_not_its_parents() -> None:
    # A child started by a parent holding ~300 MiB reports its own peak, not the parent's.
    import subprocess
    import sys

    ballast = bytearray(300 << 20)
    ballast[::4096] = b"x" * len(ballast[::4096])
    code = "from controller.summary import peak_memory_bytes; print(peak_memory_bytes())"
    reported = int(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )
    del ballast
    assert 0 < reported < 200 << 20
