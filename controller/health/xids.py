"""The Xid errors that fail a node's health check.

The NVIDIA driver reports GPU errors as numbered Xids (NVIDIA's "Xid Errors" catalogue). Many are
raised by a faulting application (13 graphics engine exception, 31 MMU fault, 43 GPU stopped
processing) and say nothing about the hardware; those are recorded in the verdict but do not fail
the check. The ones below point at the GPU, its memory, its interconnect or its firmware: a node
showing one is not given work until it has been looked at.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

CRITICAL_XIDS: Mapping[int, str] = MappingProxyType(
    {
        48: "double-bit ECC error (DBE)",
        63: "ECC page retirement or row remapping recording event",
        64: "ECC page retirement or row remapper recording failure",
        74: "NVLink error",
        79: "GPU has fallen off the bus",
        92: "high single-bit ECC error rate",
        94: "contained ECC error",
        95: "uncontained ECC error",
        119: "GSP RPC timeout",
        120: "GSP error",
    }
)
"""Xid number -> what it means, for every Xid that fails the check."""


def describe_xid(xid: int) -> str:
    """`Xid 79 (GPU has fallen off the bus)`, or `Xid 13` for one outside the critical set."""
    meaning = CRITICAL_XIDS.get(xid)
    return f"Xid {xid} ({meaning})" if meaning else f"Xid {xid}"
