"""What each fault means for the GPU, and what it asks of the node. Pure functions, no I/O.

The Xid rules are NVIDIA's Xid catalogue for Ampere and later ("Analyzing Xid Errors with the
Xid Catalog", docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html), column
"Resolution Bucket (Immediate Action)", as NVIDIA's NVSentinel transcribes it in
`distros/kubernetes/nvsentinel/charts/gpu-health-monitor/xiderrorsmapping.csv`. The counter
rules are DCGM's field semantics (dcgm_fields.h; the DCGM health and diagnostics docs,
docs.nvidia.com/datacenter/dcgm/latest/) and NVIDIA's row-remapping guide
(docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/): a pending remap takes effect at the next GPU
reset, a remap failure means a memory bank has no spare row left and the GPU must be replaced.

| rule | source bucket | kind | remedy |
| --- | --- | --- | --- |
| Xid 13, 31, 43 and every other RESTART_APP / IGNORE Xid | RESTART_APP / IGNORE | `application` | none (the application's own fault) |
| Xid 45 | WORKFLOW_XID_45 (preemptive cleanup after another error) | `application` | none: the error it follows decides |
| Xid 63 | IGNORE (a row remap was recorded) | `application` | none; the pending-remap flag asks for the reset |
| Xid 92 | IGNORE (excessive single-bit interrupts) | `degraded` | none: reported, a trend for a person |
| Xid 94 | RESTART_APP (contained ECC error) | `contained-ecc` | the pod on that GPU restarts; not the node |
| Xid 48 | WORKFLOW_XID_48 (double-bit ECC) | `uncorrectable-ecc` | gpu-reset |
| Xid 95, 140 | RESET_GPU (uncontained ECC / ECC escape) | `uncorrectable-ecc` | gpu-reset |
| Xid 46, 62, 64, 109, 110, 119, 120, 136, 143, 155, 156, 158, 162 | RESET_GPU | `gpu-error` (119/120: GSP) | gpu-reset |
| Xid 74, 144-150 | WORKFLOW_NVLINK_ERR / WORKFLOW_NVLINK5_ERR | `nvlink` | gpu-reset |
| Xid 79, 160 | RESTART_BM (fallen off the bus / channel retirement) | `fallen-off-bus` | reboot |
| volatile double-bit ECC count grew | DCGM `ECC_DBE_VOL_TOTAL` | `uncorrectable-ecc` | gpu-reset |
| uncorrectable remapped rows grew, or remap pending = 1 | DCGM `UNCORRECTABLE_REMAPPED_ROWS`, `ROW_REMAP_PENDING` | `row-remap-pending` | gpu-reset (activates the remap) |
| row remap failure = 1 | DCGM `ROW_REMAP_FAILURE` | `row-remap-failure` | replace |
| core temperature above the model's `hot_c` for every sample of `hot_for_seconds` | model catalogue (fleet/catalog.py) | `thermal` | cordon until every sample is at or below `cool_c` |
| single-bit ECC, PCIe replays, NVLink CRC errors grew | DCGM counters | `degraded` | none: reported |
| any other Xid (UNEXPECTED_ERR_REPORT_ISSUE and unknown numbers) | — | `unclassified` | none: reported for a person |

A remedy that does not bring the GPU back escalates: gpu-reset, then reboot, then replace
(`states.next_remedy`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from controller.remediation.signals import GpuSignals, NodeSignals
from controller.remediation.states import GPU_RESET, REBOOT, REPLACE

# The Xid table is the fleet's (fleet/xids.py: the Xid alert reads it too); its kinds are
# re-exported for the modules and tests that name them here.
from fleet.xids import APPLICATION as APPLICATION
from fleet.xids import CONTAINED_ECC as CONTAINED_ECC
from fleet.xids import DEGRADED as DEGRADED
from fleet.xids import FALLEN_OFF_BUS as FALLEN_OFF_BUS
from fleet.xids import GPU_ERROR as GPU_ERROR
from fleet.xids import NVLINK as NVLINK
from fleet.xids import UNCORRECTABLE_ECC as UNCORRECTABLE_ECC
from fleet.xids import XID_RULES as XID_RULES
from fleet.xids import XID_SOURCE as XID_SOURCE
from fleet.xids import XidRule as XidRule

ROW_REMAP_PENDING = "row-remap-pending"
ROW_REMAP_FAILURE = "row-remap-failure"
THERMAL = "thermal"
UNCLASSIFIED = "unclassified"

COOL = "cool"
"""Pseudo-kind: a hot node's GPUs are all back under the model's lower line."""

SEVERITY: Final = {REPLACE: 3, REBOOT: 2, GPU_RESET: 1}
"""Which remedy wins when a node shows several faults."""


@dataclass(frozen=True, kw_only=True)
class Fault:
    """One finding on one GPU: what it means (`kind`), what it asks of the node (`remedy`: None
    for none, `cordon` for a hot node), why, and where the rule comes from."""

    kind: str
    gpu: str
    reason: str
    source: str
    remedy: str | None = None

    @property
    def acts(self) -> bool:
        return self.remedy is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "gpu": self.gpu,
            "reason": self.reason,
            "source": self.source,
            "remedy": self.remedy,
        }


CORDON = "cordon"


@dataclass(frozen=True, kw_only=True)
class Thermal:
    hot_c: float
    cool_c: float
    expected_samples: int
    """Samples a GPU must have in `hot_for_seconds` for a temperature verdict."""


@dataclass(kw_only=True)
class NodeVerdict:
    """Everything found on a node this pass. `known` is False when no GPU of the node had a
    fresh series: nothing is known, and nothing is done."""

    node: str
    known: bool
    faults: list[Fault] = field(default_factory=list)
    cool: bool = False
    """Every GPU has a fresh, complete window at or below `cool_c` (a hot node may return)."""
    unknown_gpus: list[str] = field(default_factory=list)

    @property
    def worst(self) -> Fault | None:
        """The fault whose remedy is the most severe (ties: the first GPU)."""
        acting = [f for f in self.faults if f.remedy in SEVERITY]
        if not acting:
            return None
        return max(acting, key=lambda f: (SEVERITY[f.remedy or ""], -_gpu_order(f.gpu)))

    @property
    def hot(self) -> Fault | None:
        return next((f for f in self.faults if f.kind == THERMAL), None)


def _gpu_order(gpu: str) -> int:
    return int(gpu) if gpu.isdigit() else 1 << 30


def classify_gpu(gpu: GpuSignals, thermal: Thermal | None, since: float | None) -> list[Fault]:
    """The faults one fresh GPU shows. Xids first seen before `since` (the node's return to
    service) are history."""
    if not gpu.fresh:
        return []
    faults: list[Fault] = []
    for xid, first_seen in sorted(gpu.xids.items()):
        if since is not None and first_seen < since:
            continue
        rule = XID_RULES.get(xid)
        if rule is None:
            faults.append(
                Fault(
                    kind=UNCLASSIFIED,
                    gpu=gpu.gpu,
                    reason=f"Xid {xid} (not in the catalogue's acted-on buckets)",
                    source=XID_SOURCE,
                )
            )
            continue
        faults.append(
            Fault(
                kind=rule.kind,
                gpu=gpu.gpu,
                remedy=rule.remedy,
                reason=f"Xid {xid} ({rule.meaning})",
                source=f"{XID_SOURCE}: {rule.bucket}",
            )
        )
    counters, flags = gpu.counters, gpu.flags
    if counters.get("ecc_dbe_volatile", 0) > 0:
        faults.append(
            Fault(
                kind=UNCORRECTABLE_ECC,
                gpu=gpu.gpu,
                remedy=GPU_RESET,
                reason=f"volatile double-bit ECC errors grew by {counters['ecc_dbe_volatile']:g}",
                source="DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
            )
        )
    if flags.get("row_remap_failure", 0) >= 1:
        faults.append(
            Fault(
                kind=ROW_REMAP_FAILURE,
                gpu=gpu.gpu,
                remedy=REPLACE,
                reason="row remapping failed: a memory bank has no spare row left",
                source="DCGM_FI_DEV_ROW_REMAP_FAILURE",
            )
        )
    if flags.get("row_remap_pending", 0) >= 1:
        faults.append(
            Fault(
                kind=ROW_REMAP_PENDING,
                gpu=gpu.gpu,
                remedy=GPU_RESET,
                reason="a row remap is pending: it takes effect at the next GPU reset",
                source="DCGM_FI_DEV_ROW_REMAP_PENDING",
            )
        )
    elif counters.get("remapped_rows_uncorrectable", 0) > 0:
        faults.append(
            Fault(
                kind=ROW_REMAP_PENDING,
                gpu=gpu.gpu,
                remedy=GPU_RESET,
                reason=f"rows remapped for uncorrectable errors grew by {counters['remapped_rows_uncorrectable']:g}",
                source="DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
            )
        )
    for name, label in (
        ("ecc_sbe_volatile", "single-bit ECC errors"),
        ("pcie_replays", "PCIe replays"),
        ("nvlink_crc_flit_errors", "NVLink CRC flit errors"),
    ):
        if counters.get(name, 0) > 0:
            faults.append(
                Fault(
                    kind=DEGRADED,
                    gpu=gpu.gpu,
                    reason=f"{label} grew by {counters[name]:g}",
                    source=name,
                )
            )
    if (
        thermal is not None
        and gpu.temp_min_c is not None
        and gpu.temp_samples >= thermal.expected_samples
        and gpu.temp_min_c > thermal.hot_c
    ):
        faults.append(
            Fault(
                kind=THERMAL,
                gpu=gpu.gpu,
                remedy=CORDON,
                reason=f"core temperature stayed above {thermal.hot_c:g} C (lowest {gpu.temp_min_c:g} C)",
                source="DCGM_FI_DEV_GPU_TEMP; model catalogue hot_c",
            )
        )
    return faults


def classify_node(
    node: str,
    signals: NodeSignals | None,
    *,
    expected_gpus: int,
    thermal: Thermal | None,
    since: float | None = None,
) -> NodeVerdict:
    """The node's verdict. A GPU without a fresh series is unknown: its absence is never health
    (a hot node stays cordoned while any GPU is unknown) and never a fault."""
    if signals is None or not signals.fresh:
        return NodeVerdict(
            node=node, known=False, unknown_gpus=[str(i) for i in range(expected_gpus)]
        )
    verdict = NodeVerdict(node=node, known=True)
    fresh = {g.gpu: g for g in signals.fresh}
    verdict.unknown_gpus = sorted(
        ({str(i) for i in range(expected_gpus)} | set(signals.gpus)) - set(fresh), key=_gpu_order
    )
    for gpu in sorted(fresh.values(), key=lambda g: _gpu_order(g.gpu)):
        verdict.faults += classify_gpu(gpu, thermal, since)
    verdict.cool = (
        thermal is not None
        and not verdict.unknown_gpus
        and all(
            g.temp_max_c is not None
            and g.temp_samples >= thermal.expected_samples
            and g.temp_max_c <= thermal.cool_c
            for g in fresh.values()
        )
    )
    return verdict
