"""`fleetplane report` on a real Prometheus with representative data: the bill agrees with the
controller's spend to the cent, the breakdown with the GPU-hours that were held, and the HTML
page shows its charts in headless Chromium."""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fleet.config import FleetConfig
from observability.report import Month, build_report, to_csv, to_markdown, write_report

pytestmark = pytest.mark.integration


@pytest.fixture
def fleet(local_fleet: FleetConfig) -> FleetConfig:
    """The local stack with the controller period of the data (tests/observability/fleetdata)."""
    from tests.observability.fleetdata import PERIOD

    controller = local_fleet.controller.model_copy(update={"period_seconds": PERIOD})
    return local_fleet.model_copy(update={"controller": controller})


ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = Path("/tmp/fleetplane-report.png")


def test_the_bill_is_the_controllers_spend_to_the_cent(
    fleet_prometheus: Any, fleet: FleetConfig
) -> None:
    prometheus, data, _ = fleet_prometheus
    report = build_report(prometheus.url, fleet, Month.of(data.end), now=data.end)
    for team, figures in report.teams.items():
        assert figures.spend_usd == data.spend[team], team
        billed = sum(round(r.billed_usd * 100) for r in report.rows if r.team == team)
        assert billed == round(data.spend[team] * 100), team
        # The integral differs by the last pass's period only (the spend lags one period).
        assert figures.integrated_usd >= figures.spend_usd
    for row in report.rows:
        key = (row.team, row.workload_type, row.model, row.capacity_type)
        # The last sample is counted for one period forward by the integral.
        assert data.gpu_hours[key] - 1e-6 <= row.gpu_hours <= data.gpu_hours[key] + 8 * 300 / 3600
    research = report.teams["research"]
    assert research.cost_per_training_hour is not None
    assert 1.23 < research.cost_per_training_hour < 12.29
    assert report.teams["serving"].cost_per_inference_hour == pytest.approx(12.29)
    assert report.teams["serving"].inference_availability is not None
    assert report.teams["serving"].inference_availability < 1
    assert report.teams["analytics"].idle_gpu_hours > 0
    # burst GPU-hours: research's on the on-demand tier, nobody else's
    (tier,) = research.burst_gpu_hours
    want = data.burst_gpu_hours[("research", tier)]
    assert tier == "on-demand"
    assert want - 1e-6 <= research.burst_gpu_hours[tier] <= want + 8 * 300 / 3600
    assert (
        research.burst_gpu_hours[tier]
        < data.gpu_hours[("research", "training", "h100-80gb", "on-demand")]
    )
    assert not report.teams["serving"].burst_gpu_hours
    shown = f"{research.burst_gpu_hours[tier]:,.1f} on-demand"
    assert "burst GPU-h" in to_markdown(report) and shown in to_markdown(report)
    assert report.teams["analytics"].reclaimed_gpu_hours > 0
    assert research.wait_p95 is not None and 900 < research.wait_p95 <= 1800
    assert research.energy_kwh > 0 and research.emissions_kg > 0
    assert research.emissions_per_training_hour_g is not None
    rows = list(csv.DictReader(io.StringIO(to_csv(report))))
    assert {r["capacity_type"] for r in rows} == {"on-demand", "spot"}


def test_the_command_writes_csv_markdown_and_html(
    fleet_prometheus: Any, local_fleet: FleetConfig, tmp_path: Path
) -> None:
    prometheus, data, _ = fleet_prometheus
    month = Month.of(data.end).name
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "fleetplane",
            "report",
            "--month",
            month,
            "--prometheus-url",
            prometheus.url,
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert f"# GPU chargeback, {month}" in result.stdout
    assert "## Reconciliation" in result.stdout
    for suffix in ("csv", "md", "html"):
        assert (tmp_path / f"report-{month}.{suffix}").stat().st_size > 0


def _chromium() -> str:
    """Debian's chromium, which `make system-packages` (part of `make test`) installs."""
    found = shutil.which("chromium")
    assert found, "chromium is needed for the report's screenshot: run `make system-packages`"
    return found


def test_the_html_page_shows_its_charts_in_chromium(
    fleet_prometheus: Any, fleet: FleetConfig, tmp_path: Path
) -> None:
    prometheus, data, _ = fleet_prometheus
    report = build_report(prometheus.url, fleet, Month.of(data.end), now=data.end)
    page = write_report(report, tmp_path)["html"]
    text = page.read_text()
    assert text.count("<svg") == 3 and "http" not in text.split("<body>")[1].replace(
        "http://www.w3.org/2000/svg", ""
    ), "self-contained: no external resource"
    chromium = _chromium()
    dom = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dom.stdout.count("<rect") >= 6, dom.stderr[-2000:]
    shot = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1280,1400",
            f"--screenshot={SCREENSHOT}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert SCREENSHOT.exists(), shot.stderr[-2000:]
    _assert_chart_colours(SCREENSHOT)


def _assert_chart_colours(png: Path) -> None:
    """The screenshot holds the charts: pixels of at least three of the bar colours."""
    from matplotlib import image

    pixels = image.imread(str(png))
    seen = set()
    for colour in ("#4e79a7", "#f28e2b", "#59a14f", "#e15759"):
        rgb = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        close = (abs(pixels[:, :, :3] - rgb) < 0.02).all(axis=2)
        if close.sum() > 500:
            seen.add(colour)
    assert len(seen) >= 3, f"chart colours found in the screenshot: {seen}"
