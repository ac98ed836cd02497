"""The DCGM fields the fleet reads, held against every reader of DCGM series in the product, and
the counters file generated from them, read back as dcgm-exporter reads it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fleet.dcgm import FIELDS, KINDS, counters_csv, enabled_fields

ROOT = Path(__file__).resolve().parents[2]
READERS = (
    *sorted((ROOT / "controller").rglob("*.py")),
    ROOT / "observability" / "rules.yaml",
    ROOT / "observability" / "dashboards.py",
    ROOT / "observability" / "report.py",
)
"""Where the product reads DCGM series: the controller's queries, the alert and recording
rules, the dashboards, the chargeback report."""
# A field name, not a prefix written as a pattern (`DCGM_FI_DEV_ECC_{SBE,DBE}_...` in a
# docstring): it ends in a letter or digit and no word character follows.
FIELD_NAME = re.compile(r"DCGM_FI_\w*[A-Za-z0-9](?!\w)")


def read_fields() -> dict[str, set[str]]:
    """Field name -> the files that name it."""
    found: dict[str, set[str]] = {}
    for path in READERS:
        for name in FIELD_NAME.findall(path.read_text(encoding="utf-8")):
            found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def test_the_counters_file_enables_exactly_what_the_product_reads() -> None:
    read = read_fields()
    enabled = set(enabled_fields(counters_csv()))
    assert not set(read) - enabled, {
        name: sorted(files) for name, files in read.items() if name not in enabled
    }
    assert not enabled - set(read), "enabled but read nowhere"


def test_the_scan_sees_every_reader() -> None:
    """The scan is not vacuous: each kind of reader names the fields it is known to read."""
    read = read_fields()
    assert "controller/remediation/signals.py" in read["DCGM_FI_DEV_ROW_REMAP_PENDING"]
    assert "controller/observe/metrics.py" in read["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
    assert "observability/rules.yaml" in read["DCGM_FI_DEV_XID_ERRORS"]
    assert "observability/dashboards.py" in read["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"]
    assert "observability/report.py" in read["DCGM_FI_DEV_POWER_USAGE"]
    assert "DCGM_FI_DEV_ECC" not in read


def test_the_file_reads_back_as_the_list() -> None:
    text = counters_csv()
    assert text.startswith("# Format\n")
    assert enabled_fields(text) == {field.name: field for field in FIELDS}
    assert list(enabled_fields(text)) == [field.name for field in FIELDS]
    assert all(field.kind in KINDS for field in FIELDS)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("DCGM_FI_DEV_GPU_UTIL, gauge\n", "expected 3 fields"),
        ("DCGM_FI_DEV_GPU_UTIL, gauge, a, b\n", "expected 3 fields"),
        ("DCGM_FI_DEV_GPU_UTIL, label, Driver\n", "type 'label'"),
        ("GPU_UTIL, gauge, x\n", "not a DCGM field"),
        ("DCGM_FI_DEV_GPU_UTIL, gauge, x\nDCGM_FI_DEV_GPU_UTIL, gauge, y\n", "listed twice"),
    ],
)
def test_a_record_dcgm_exporter_would_refuse_is_refused(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        enabled_fields(text)


def test_comments_and_blank_lines_enable_nothing() -> None:
    text = (
        "# Format\n\n"
        "# DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, counter, commented out\n"
        "DCGM_FI_DEV_GPU_TEMP, gauge, t\n"
    )
    assert list(enabled_fields(text)) == ["DCGM_FI_DEV_GPU_TEMP"]
