"""Unit tests of the pass summary (Prometheus exposition) and the configuration view."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.config import ConfigProblems, Settings, parse_config
from controller.summary import Summary, parse_exposition
from tests.controller.builders import assert_same, config_document, fleet


def test_exposition_is_prometheus_text_with_help_and_type(tmp_path: Path) -> None:
    summary = Summary(dry_run=True)
    summary.action("idle", "warn", "done")
    summary.action("idle", "warn", "done")
    summary.action("idle", "reclaim", "denied")
    summary.set("team_spend_usd", 12.5, team='re"search')
    summary.finish(api_requests=7)
    text = summary.exposition()
    assert "# HELP fleetplane_controller_actions_total " in text
    assert "# TYPE fleetplane_controller_actions_total counter" in text
    assert (
        'fleetplane_controller_actions_total{action="warn",concern="idle",outcome="done"} 2' in text
    )
    assert (
        'fleetplane_controller_refusals_total{action="reclaim",concern="idle",reason="policy"} 1'
        in text
    )
    assert 'fleetplane_team_spend_usd{team="re\\"search"} 12.5' in text
    assert "fleetplane_controller_api_requests 7" in text
    assert "fleetplane_controller_dry_run 1" in text
    assert 'fleetplane_controller_passes_total{outcome="success"} 1' in text
    assert "# TYPE fleetplane_controller_pass_duration_seconds gauge" in text
    target = tmp_path / "out" / "controller.prom"
    summary.write_textfile(target)
    assert target.read_text() == text
    assert [p.name for p in target.parent.iterdir()] == ["controller.prom"]


def test_counters_and_the_histogram_continue_from_the_previous_pass(tmp_path: Path) -> None:
    """Each pass is a new process: counters add to what was published before, gauges do not."""
    target = tmp_path / "controller.prom"
    first = Summary()
    first.action("idle", "reclaim", "done")
    first.observe("queue_wait", 45, team="research", workload_type="training")
    first.set("team_spend_usd", 10, team="research")
    first.finish(api_requests=1)
    first.write_textfile(target)
    second = Summary()
    second.action("idle", "reclaim", "done")
    second.observe("queue_wait", 4000, team="research", workload_type="training")
    second.set("team_spend_usd", 12, team="research")
    second.finish(api_requests=1)
    second.write_textfile(target)
    series = parse_exposition(target.read_text())
    labels = (("action", "reclaim"), ("concern", "idle"), ("outcome", "done"))
    assert series[("fleetplane_controller_actions_total", labels)] == 2
    assert series[("fleetplane_controller_passes_total", (("outcome", "success"),))] == 2
    assert series[("fleetplane_team_spend_usd", (("team", "research"),))] == 12
    wait = (("team", "research"), ("workload_type", "training"))
    assert series[("fleetplane_queue_wait_seconds_count", wait)] == 2
    assert series[("fleetplane_queue_wait_seconds_sum", wait)] == 4045
    assert series[("fleetplane_queue_wait_seconds_bucket", (("le", "60"), *wait))] == 1
    assert series[("fleetplane_queue_wait_seconds_bucket", (("le", "7200"), *wait))] == 2
    assert series[("fleetplane_queue_wait_seconds_bucket", (("le", "+Inf"), *wait))] == 2


def test_declared_series_exist_at_zero_until_counted_and_never_lose_a_count() -> None:
    """Prometheus' increase() cannot see the first value of a series born non-zero, so what a
    pass may count later is exposed at 0 first (a reclaim, a refusal, an error, a wait)."""
    first = Summary()
    labels = {"team": "research", "resource": "nvidia.com/gpu", "workload_type": "notebook"}
    first.declare("reclaimed_gpu_hours", **labels)
    first.declare("queue_wait", team="research", workload_type="notebook")
    first.declare_errors("idle")
    first.action("idle", "reclaim", "done")
    exposed = parse_exposition(first.exposition())
    hours = ("fleetplane_team_reclaimed_gpu_hours_total", tuple(sorted(labels.items())))
    assert exposed[hours] == 0
    errors = ("fleetplane_controller_errors_total", (("concern", "idle"), ("kind", "permanent")))
    assert exposed[errors] == 0
    refused = (
        "fleetplane_controller_refusals_total",
        (("action", "reclaim"), ("concern", "idle"), ("reason", "policy")),
    )
    assert exposed[refused] == 0
    count = (
        "fleetplane_queue_wait_seconds_count",
        (("team", "research"), ("workload_type", "notebook")),
    )
    assert exposed[count] == 0

    second = Summary()
    second.inc("reclaimed_gpu_hours", 2.0, **labels)
    second.declare("reclaimed_gpu_hours", **labels)  # declaring after counting keeps the count
    second.observe("queue_wait", 40.0, team="research", workload_type="notebook")
    second.declare("queue_wait", team="research", workload_type="notebook")
    carried = parse_exposition(second.exposition(exposed))
    assert carried[hours] == 2.0
    assert carried[count] == 1


def test_a_pushgateway_group_is_read_back_without_its_grouping_labels() -> None:
    text = (
        "# TYPE fleetplane_controller_actions_total counter\n"
        'fleetplane_controller_actions_total{action="warn",concern="idle",instance="",'
        'job="fleetplane-controller",outcome="done"} 3\n'
        'fleetplane_controller_actions_total{action="warn",concern="idle",instance="",'
        'job="other",outcome="done"} 9\n'
        'push_time_seconds{instance="",job="fleetplane-controller"} 1.7e+09\n'
    )
    found = parse_exposition(text, group={"job": "fleetplane-controller"})
    labels = (("action", "warn"), ("concern", "idle"), ("outcome", "done"))
    assert found[("fleetplane_controller_actions_total", labels)] == 3
    assert ("push_time_seconds", ()) in found  # not a family of ours: never carried over
    summary = Summary()
    summary.finish(api_requests=0)
    assert "push_time_seconds" not in summary.exposition(found)


def test_a_pushgateway_that_is_down_is_a_temporary_error_quickly() -> None:
    import time

    from controller.errors import TemporaryError

    summary = Summary()
    summary.finish(api_requests=0)
    started = time.monotonic()
    with pytest.raises(TemporaryError):
        summary.push("http://127.0.0.1:9", timeout=1)
    assert time.monotonic() - started < 5


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
