"""DCGM evidence read in two steps from a real Prometheus (backfilled by promtool): the peak
utilisation of every GPU, then the full evidence only for pods that may be idle."""

from __future__ import annotations

import time
from typing import Any

import pytest

from controller.observe import metrics
from controller.observe.metrics import PodEvidence, Prometheus
from tests.controller.conftest import SCRAPE, WINDOW, dcgm

pytestmark = pytest.mark.integration

NOW = float(int(time.time()) - 120)
START = NOW - WINDOW - 300
FULL = WINDOW // SCRAPE  # samples of a complete series inside the window, at least


def fleet_samples() -> list[Any]:
    return [
        # busy: utilisation far above any idle line
        *dcgm("train-0", "ml-a", "node-1", START, NOW, util=80.0),
        # idle on both GPUs, framebuffer moving on one of them
        *dcgm("nb.v2", "ml-a", "node-2", START, NOW, util=0.0, gpus=2),
        # same name as the idle pod, another namespace, busy: must not be detailed
        *dcgm("nb.v2", "ml-b", "node-3", START, NOW, util=55.0),
        # idle, in the other namespace
        *dcgm("job-1", "ml-b", "node-4", START, NOW, util=2.0, fb=4096.0),
        # busy on one sample only, and only half the window covered
        *dcgm(
            "burst", "ml-a", "node-5", NOW - WINDOW / 2, NOW, util=lambda t: 90.0 if t == NOW else 0
        ),
    ]


@pytest.fixture(scope="module")
def prometheus_url(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from localfleet.servers import PrometheusServer

    server = PrometheusServer(work_dir=tmp_path_factory.mktemp("prometheus"))
    server.start(fleet_samples())
    try:
        yield server.url
    finally:
        server.stop()


def evidence(url: str, line: float = 5.0) -> tuple[dict[tuple[str, str], PodEvidence], int]:
    client = Prometheus(url, timeout=30)
    try:
        found = client.evidence(WINDOW, NOW, line)
        return found, client.requests_made
    finally:
        client.close()


def test_busy_pods_get_their_peak_only_and_idle_pods_everything(prometheus_url: str) -> None:
    found, requests = evidence(prometheus_url)
    assert requests == 1 + 5  # the fleet's peaks, then five detail queries for the candidates
    busy = found[("ml-a", "train-0")]
    assert not busy.detailed
    [series] = busy.gpus.values()
    assert series.max_util_percent == 80.0
    assert (series.util_samples, series.fb_samples, series.max_fb_used_mib) == (0, 0, None)

    idle = found[("ml-a", "nb.v2")]
    assert idle.detailed
    assert sorted(idle.gpus) == [("node-2", "0"), ("node-2", "1")]
    for series in idle.gpus.values():
        assert series.util_samples >= FULL and series.fb_samples >= FULL
        assert series.max_util_percent == 0.0
        assert series.max_fb_used_mib == series.min_fb_used_mib == 2048.0

    assert not found[("ml-b", "nb.v2")].detailed  # a namespace x name cross match stays out
    assert found[("ml-b", "job-1")].detailed
    assert found[("ml-b", "job-1")].gpus[("node-4", "0")].max_fb_used_mib == 4096.0

    burst = found[("ml-a", "burst")]
    assert not burst.detailed
    assert burst.gpus[("node-5", "0")].max_util_percent == 90.0


def test_no_candidates_means_one_query(prometheus_url: str) -> None:
    found, requests = evidence(prometheus_url, line=-1.0)
    assert requests == 1
    assert not any(e.detailed for e in found.values())
    assert len(found) == 5


def test_fleet_wide_and_batched_details_agree_with_named_pods(
    prometheus_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    named, _ = evidence(prometheus_url)
    monkeypatch.setattr(metrics, "DETAIL_FLEET_WIDE_ABOVE", 1)
    fleet_wide, requests = evidence(prometheus_url)
    assert requests == 1 + 5
    assert fleet_wide == named
    monkeypatch.setattr(metrics, "DETAIL_FLEET_WIDE_ABOVE", 1000)
    monkeypatch.setattr(metrics, "DETAIL_BATCH", 1)
    batched, requests = evidence(prometheus_url)
    assert requests == 1 + 5 * 2  # two candidate pods, one per batch
    assert batched == named


def test_an_idle_line_of_100_percent_details_every_pod(prometheus_url: str) -> None:
    client = Prometheus(prometheus_url, timeout=30)
    try:
        found = client.evidence_for_windows({WINDOW: 100.0}, NOW)[WINDOW]
    finally:
        client.close()
    assert all(e.detailed for e in found.values())
    assert found[("ml-a", "train-0")].gpus[("node-1", "0")].util_samples >= FULL


def test_label_set_is_an_exact_match_regex() -> None:
    assert metrics.label_set(["b.c", "a", "a"]) == "a|b\\\\.c"
    assert metrics.label_set(['x"y']) == 'x\\"y'
