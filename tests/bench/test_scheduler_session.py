"""bench/scheduler_session.py: its reading of Prometheus histograms, and a tiny run end to end
against the real vc-scheduler and the placement service (figures unchecked for speed: both
configurations report sessions that placed pods, and the service answered)."""

from __future__ import annotations

import re

import pytest

from bench import scheduler_session

# Cumulative buckets as client_golang writes them: 2 observations up to 1 ms, 6 up to 10 ms,
# 10 in all.
HISTOGRAM = """\
# TYPE volcano_action_scheduling_latency_milliseconds histogram
volcano_action_scheduling_latency_milliseconds_bucket{action="allocate",le="1"} 2
volcano_action_scheduling_latency_milliseconds_bucket{action="allocate",le="10"} 6
volcano_action_scheduling_latency_milliseconds_bucket{action="allocate",le="100"} 10
volcano_action_scheduling_latency_milliseconds_bucket{action="allocate",le="+Inf"} 10
volcano_action_scheduling_latency_milliseconds_sum{action="allocate"} 123.5
volcano_action_scheduling_latency_milliseconds_count{action="allocate"} 10
volcano_action_scheduling_latency_milliseconds_sum{action="enqueue"} 7
volcano_e2e_scheduling_latency_milliseconds_count 4
"""


def test_histograms_are_read_as_prometheus_reads_them() -> None:
    series = scheduler_session.parse_metrics(HISTOGRAM)
    name = scheduler_session.ACTION
    assert scheduler_session.value(series, name + "_sum", action="allocate") == 123.5
    assert scheduler_session.value(series, scheduler_session.E2E + "_count") == 4
    # The median (rank 5) lies in the 1..10 bucket, 3 of its 4 observations in: 1 + 9 * 3/4.
    median = scheduler_session.histogram_quantile(series, name, 0.5, action="allocate")
    assert median == pytest.approx(7.75)
    assert scheduler_session.histogram_quantile(series, name, 0.1, action="allocate") == 0.5
    earlier = scheduler_session.parse_metrics(HISTOGRAM.replace("123.5", "100.5"))
    window = scheduler_session.delta(series, earlier)
    assert scheduler_session.value(window, name + "_sum", action="allocate") == 23
    assert scheduler_session.histogram_quantile(window, name, 0.5, action="allocate") is None


ROW = re.compile(r"^\| (shipped|fgd) \| (\d+)/(\d+) \| (\d+) \| (\d+) / (\d+) / (\d+) \|", re.M)


@pytest.mark.integration
def test_a_tiny_run_reports_both_configurations(capsys: pytest.CaptureFixture[str]) -> None:
    code = scheduler_session.main(["--nodes", "12", "--pods", "8", "--idle-seconds", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = {m[1]: m for m in ROW.finditer(out)}
    assert set(rows) == {"shipped", "fgd"}, out
    for row in rows.values():
        placed, pods, lone = int(row[2]), int(row[3]), int(row[4])
        assert pods == 8 and 0 < lone <= placed <= pods, out
        p50, p90, p99 = (int(row[i]) for i in (5, 6, 7))
        assert 0 < p50 <= p90 <= p99, out
    service = re.search(r"placement service: (\d+) prioritize calls", out)
    assert service is not None and int(service[1]) > 0, out
