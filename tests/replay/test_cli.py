"""The command line end to end on a small trace: every default scenario, the table on stdout,
and the report (Markdown, PNGs, JSON) on disk, against the real OPA (`opa_server`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localfleet.servers import OpaServer
from tests.commands import fleetplane

HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"


def small_trace(directory: Path) -> None:
    rows = [HEADER]
    for i in range(24):
        gpus = 8 if i % 11 == 0 else 1
        qos = ("LS", "BE", "Burstable")[i % 3]
        created = i * 1800
        rows.append(
            f"pod-{i},8000,16384,{gpus},{1000 if i % 2 else 400},,{qos},Running,"
            f"{created},{created + 4000 + (i % 5) * 9000},{created}"
        )
    (directory / "openb_pod_list_default.csv").write_text("\n".join(rows) + "\n")
    (directory / "openb_node_list_gpu_node.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nn-0,64000,262144,8,G2\n"
    )


@pytest.mark.integration
def test_the_command_prints_the_table_and_writes_the_report(
    opa_server: OpaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small_trace(tmp_path)
    out = tmp_path / "report"
    try:
        status = fleetplane(
            "replay",
            *[
                "--trace-dir",
                str(tmp_path),
                "--opa-url",
                opa_server.url,
                "--window",
                "all",
                "--out",
                str(out),
                "--quiet",
            ],
        )
    finally:
        opa_server.put_data("fleetplane/spend", {})
    printed = capsys.readouterr().out
    assert status == 0
    for name in ("1. fixed", "2. autoscaled", "3. spot", "4. reclaim", "5. governed"):
        assert name in printed
    assert "events/s" in printed and "periods/s" in printed
    document = json.loads((out / "figures.json").read_text())
    assert [s["name"] for s in document["scenarios"]] == [
        "fixed",
        "autoscaled",
        "spot",
        "reclaim",
        "governed",
    ]
    assert all(s["harmed_non_preemptible"]["count"] == 0 for s in document["scenarios"])
    assert document["trace"]["gpu_pods"] == 24
    report = (out / "report.md").read_text()
    for png in ("cost.png", "utilisation.png", "fleet-over-time.png", "queue-wait.png"):
        assert (out / png).stat().st_size > 10_000
        assert f"]({png})" in report


def test_a_trace_without_times_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "openb_pod_list_default.csv").write_text("name,num_gpu,gpu_milli\na,1,1000\n")
    assert fleetplane(*["replay", "--trace-dir", str(tmp_path), "--quiet"]) == 2
    assert "creation_time" in capsys.readouterr().err
