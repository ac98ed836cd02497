"""The DCGM fields the fleet reads, and the dcgm-exporter counters file that enables them.

dcgm-exporter serves only the fields its counters file lists, and the file the GPU Operator
mounts by default (dcgm-exporter's `etc/dcp-metrics-included.csv`, like its
`etc/default-counters.csv`) leaves the ECC and NVLink error counters commented out and has no
row-remap-pending line: the health remediation would never see those faults. So the fleet ships
its own file, generated from `FIELDS`, which enables exactly the fields something of the product
reads, and nothing else:

- the controller: idle evidence and stragglers (controller/observe/metrics.py,
  controller/remediation/signals.py), GPU health (controller/remediation/signals.py);
- the rules (observability/rules.yaml), the dashboards (observability/dashboards.py) and the
  chargeback report (observability/report.py).

`tests/fleet/test_dcgm.py` scans those for `DCGM_FI_*` names and fails when one is read but not
listed here, or listed but read nowhere. The GPU Operator's values deploy the file
(components/gpu_operator.py), and the local fleet's dcgm-exporter stand-in serves exactly the
fields it enables (localfleet/dcgm_exporter.py reads it back with `enabled_fields`).

The file's format is dcgm-exporter's (internal/pkg/counters/counter_config.go): CSV, a line
starting with `#` is a comment, each record is `DCGM field, Prometheus type, help`, spaces around
the fields trimmed. Help texts are dcgm-exporter's own, so the real exporter and the stand-in
print the same `# HELP` lines.
"""

from __future__ import annotations

import csv
import textwrap
from dataclasses import dataclass
from typing import Final

COUNTERS_FILE: Final = "dcgm-metrics.csv"
"""The key the GPU Operator mounts from the ConfigMap named by `dcgmExporter.config.name`
(as /etc/dcgm-exporter/dcgm-metrics.csv, with DCGM_EXPORTER_COLLECTORS pointing at it)."""

KINDS: Final = ("gauge", "counter")
"""The Prometheus types the fleet's fields have (dcgm-exporter also knows histogram, summary
and label; no field the fleet reads is one)."""


@dataclass(frozen=True, kw_only=True)
class DcgmField:
    name: str
    kind: str
    help: str


@dataclass(frozen=True, kw_only=True)
class Section:
    """Fields read for one purpose, and by whom (a comment line of the file)."""

    title: str
    fields: tuple[DcgmField, ...]


SECTIONS: Final = (
    Section(
        title=(
            "Utilisation and memory: idle evidence and stragglers (controller/observe/metrics.py, "
            "controller/remediation/signals.py); dashboards; chargeback; team utilisation rule"
        ),
        fields=(
            DcgmField(name="DCGM_FI_DEV_GPU_UTIL", kind="gauge", help="GPU utilization (in %)."),
            DcgmField(
                name="DCGM_FI_PROF_GR_ENGINE_ACTIVE",
                kind="gauge",
                help="Ratio of time the graphics engine is active.",
            ),
            DcgmField(
                name="DCGM_FI_DEV_FB_USED", kind="gauge", help="Framebuffer memory used (in MiB)."
            ),
        ),
    ),
    Section(
        title=(
            "Temperature and power: GPU health (controller/remediation/signals.py); "
            "the hot-GPU alert; dashboards; chargeback energy"
        ),
        fields=(
            DcgmField(name="DCGM_FI_DEV_GPU_TEMP", kind="gauge", help="GPU temperature (in C)."),
            DcgmField(name="DCGM_FI_DEV_POWER_USAGE", kind="gauge", help="Power draw (in W)."),
        ),
    ),
    Section(
        title=(
            "Errors: GPU health (controller/remediation/signals.py); the Xid and ECC alerts; "
            "dashboards. dcgm-exporter's default files leave the ECC, NVLink and "
            "row-remap-pending lines off"
        ),
        fields=(
            DcgmField(
                name="DCGM_FI_DEV_XID_ERRORS",
                kind="gauge",
                help="Value of the last XID error encountered.",
            ),
            DcgmField(
                name="DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
                kind="counter",
                help="Total number of single-bit volatile ECC errors.",
            ),
            DcgmField(
                name="DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
                kind="counter",
                help="Total number of double-bit volatile ECC errors.",
            ),
            DcgmField(
                name="DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
                kind="counter",
                help="Total number of single-bit persistent ECC errors.",
            ),
            DcgmField(
                name="DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
                kind="counter",
                help="Total number of double-bit persistent ECC errors.",
            ),
            DcgmField(
                name="DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
                kind="counter",
                help="Number of remapped rows for uncorrectable errors",
            ),
            DcgmField(
                name="DCGM_FI_DEV_ROW_REMAP_FAILURE",
                kind="gauge",
                help="Whether remapping of rows has failed",
            ),
            DcgmField(
                name="DCGM_FI_DEV_ROW_REMAP_PENDING",
                kind="gauge",
                help="Whether remapping of rows is pending",
            ),
            DcgmField(
                name="DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
                kind="counter",
                help="Total number of PCIe retries.",
            ),
            DcgmField(
                name="DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
                kind="counter",
                help="Total number of NVLink flow-control CRC errors.",
            ),
        ),
    ),
)

FIELDS: Final = tuple(field for section in SECTIONS for field in section.fields)
"""Every field the fleet reads, in the file's order."""


def counters_csv() -> str:
    """The counters file: dcgm-exporter's header, then one commented section per purpose."""
    lines = [
        "# Format",
        "# If line starts with a '#' it is considered a comment",
        "# DCGM FIELD, Prometheus metric type, help message",
        "#",
        "# fleetplane's counters: exactly the DCGM fields the fleet reads (generated from",
        "# fleet/dcgm.py; a field added here without a reader, or read without being here, fails",
        "# its tests).",
    ]
    for section in SECTIONS:
        lines += [
            "",
            *textwrap.wrap(section.title, 96, initial_indent="# ", subsequent_indent="# "),
        ]
        lines += [f"{f.name}, {f.kind}, {f.help}" for f in section.fields]
    return "\n".join(lines) + "\n"


def enabled_fields(text: str) -> dict[str, DcgmField]:
    """The fields a counters file enables, read as dcgm-exporter reads it (comment lines start
    with `#`, blank lines are skipped, every record has three fields, spaces trimmed), by name.
    ValueError for a record dcgm-exporter would refuse, or a type the fleet does not use."""
    records = csv.reader(
        line for line in text.splitlines() if line.strip() and not line.startswith("#")
    )
    out: dict[str, DcgmField] = {}
    for number, record in enumerate(records, start=1):
        if len(record) != 3:
            raise ValueError(f"counters record {number}: expected 3 fields, got {record}")
        name, kind, help_text = (part.strip(" ") for part in record)
        if not name.startswith("DCGM_FI_"):
            raise ValueError(f"counters record {number}: {name!r} is not a DCGM field")
        if kind not in KINDS:
            raise ValueError(f"counters record {number}: {name}: type {kind!r} not in {KINDS}")
        if name in out:
            raise ValueError(f"counters record {number}: {name} is listed twice")
        out[name] = DcgmField(name=name, kind=kind, help=help_text)
    return out
