"""NVIDIA's Xid errors: what each one means for the GPU and what it asks of the node.

One table, read twice: the controller's run-time remediation classifies a GPU's Xids with it
(controller/remediation/classify.py), and the Xid alert of observability/rules.yaml pages only
for the Xids it gives a remedy (`actionable_xids`). An application's own errors (13, 31, 43, 45
and the rest of RESTART_APP / IGNORE) page nobody and move no node.

The rules are NVIDIA's Xid catalogue for Ampere and later ("Analyzing Xid Errors with the Xid
Catalog", docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html), column "Resolution
Bucket (Immediate Action)", as NVIDIA's NVSentinel transcribes it in
`distros/kubernetes/nvsentinel/charts/gpu-health-monitor/xiderrorsmapping.csv`. An Xid not in
the table is unclassified: reported for a person, never acted on, never paged.

Data only, no I/O: the fleet model sits below the controller and the rule generation alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# Fault kinds an Xid can be (the controller's remediation adds the kinds of its counter rules).
APPLICATION: Final = "application"
CONTAINED_ECC: Final = "contained-ecc"
UNCORRECTABLE_ECC: Final = "uncorrectable-ecc"
GPU_ERROR: Final = "gpu-error"
NVLINK: Final = "nvlink"
FALLEN_OFF_BUS: Final = "fallen-off-bus"
DEGRADED: Final = "degraded"

# Remedies, as the remediation's states name them (controller/remediation/states.py; a test
# holds the two together).
GPU_RESET: Final = "gpu-reset"
REBOOT: Final = "reboot"

XID_SOURCE: Final = "NVIDIA Xid catalogue, immediate-action bucket"


@dataclass(frozen=True, kw_only=True)
class XidRule:
    kind: str
    remedy: str | None
    """None: the Xid asks nothing of the node (the application's own error, or a report)."""
    bucket: str
    meaning: str


_APP_XIDS: tuple[int, ...] = (
    *(8, 11, 13, 14, 25, 31, 32, 37, 38, 39, 40, 41, 43, 44, 60, 63, 66, 67, 68, 69, 70, 71, 72),
    *(75, 76, 77, 80, 82, 83, 84, 85, 86, 88, 89, 93, 96, 97, 98, 99),
    *range(100, 108),
    *range(126, 136),
    *(121, 137, 139, 141, 152, 153, 157, 159, 161),
)
"""The RESTART_APP and IGNORE buckets: the application's fault, or a benign event."""


def _rules() -> dict[int, XidRule]:
    rules = {
        x: XidRule(
            kind=APPLICATION,
            remedy=None,
            bucket="RESTART_APP/IGNORE",
            meaning="application or benign event",
        )
        for x in _APP_XIDS
    }
    rules[13] = XidRule(
        kind=APPLICATION, remedy=None, bucket="RESTART_APP", meaning="graphics engine exception"
    )
    rules[31] = XidRule(
        kind=APPLICATION, remedy=None, bucket="RESTART_APP", meaning="GPU memory page fault (MMU)"
    )
    rules[43] = XidRule(
        kind=APPLICATION,
        remedy=None,
        bucket="IGNORE",
        meaning="GPU stopped processing (reset channel)",
    )
    rules[45] = XidRule(
        kind=APPLICATION,
        remedy=None,
        bucket="WORKFLOW_XID_45",
        meaning="preemptive cleanup after a previous error",
    )
    rules[63] = XidRule(
        kind=APPLICATION,
        remedy=None,
        bucket="IGNORE",
        meaning="row remap / page retirement recorded",
    )
    rules[92] = XidRule(
        kind=DEGRADED, remedy=None, bucket="IGNORE", meaning="excessive single-bit ECC interrupts"
    )
    rules[94] = XidRule(
        kind=CONTAINED_ECC, remedy=None, bucket="RESTART_APP", meaning="contained ECC error"
    )
    rules[48] = XidRule(
        kind=UNCORRECTABLE_ECC,
        remedy=GPU_RESET,
        bucket="WORKFLOW_XID_48",
        meaning="double-bit ECC error",
    )
    rules[95] = XidRule(
        kind=UNCORRECTABLE_ECC,
        remedy=GPU_RESET,
        bucket="RESET_GPU",
        meaning="uncontained ECC error",
    )
    rules[140] = XidRule(
        kind=UNCORRECTABLE_ECC,
        remedy=GPU_RESET,
        bucket="RESET_GPU",
        meaning="unrecoverable ECC error escape",
    )
    for xid, meaning in {
        46: "GPU timeout",
        62: "PMU halt",
        64: "row remapper / page retirement recording failure",
        109: "context switch timeout",
        110: "security fault",
        119: "GSP RPC timeout",
        120: "GSP error",
        136: "link training failure",
        143: "GPU initialisation error",
        155: "NVLink software-defined error",
        156: "resource retirement event",
        158: "GPU fatal timeout",
        162: "reset required",
    }.items():
        rules[xid] = XidRule(kind=GPU_ERROR, remedy=GPU_RESET, bucket="RESET_GPU", meaning=meaning)
    rules[74] = XidRule(
        kind=NVLINK, remedy=GPU_RESET, bucket="WORKFLOW_NVLINK_ERR", meaning="NVLink error"
    )
    for xid in range(144, 151):
        rules[xid] = XidRule(
            kind=NVLINK, remedy=GPU_RESET, bucket="WORKFLOW_NVLINK5_ERR", meaning="NVLink 5 error"
        )
    rules[79] = XidRule(
        kind=FALLEN_OFF_BUS,
        remedy=REBOOT,
        bucket="RESTART_BM",
        meaning="GPU has fallen off the bus",
    )
    rules[160] = XidRule(
        kind=FALLEN_OFF_BUS, remedy=REBOOT, bucket="RESTART_BM", meaning="channel retirement event"
    )
    return rules


XID_RULES: Final[dict[int, XidRule]] = _rules()
"""Xid -> its rule; an Xid not listed is `unclassified` (reported, never acted on)."""


def actionable_xids() -> tuple[int, ...]:
    """The Xids whose rule asks something of the node (a remedy), ascending: the ones that
    page."""
    return tuple(sorted(xid for xid, rule in XID_RULES.items() if rule.remedy is not None))
