"""GPU health evidence from dcgm-exporter's series, read through Prometheus.

Metric names and labels are dcgm-exporter's own (its `etc/default-counters.csv` and collector):
every series carries `gpu` (index), `UUID`, `device` (`nvidia0`), `modelName`, `Hostname`
(the node), and, for GPUs allocated to a pod, `pod`, `namespace`, `container`.

| signal | series | read as |
| --- | --- | --- |
| freshness | `DCGM_FI_DEV_GPU_TEMP` | `timestamp()` of the newest sample: older than `stale_after_seconds` (or absent) is unknown |
| temperature | `DCGM_FI_DEV_GPU_TEMP` (C) | min, max and count over `hot_for_seconds` |
| power | `DCGM_FI_DEV_POWER_USAGE` (W) | max over the window (reported) |
| Xid | `DCGM_FI_DEV_XID_ERRORS` (gauge: the *last* Xid) | every distinct non-zero value over the window with the first time seen (`count_values` in a subquery) |
| ECC | `DCGM_FI_DEV_ECC_{SBE,DBE}_{VOL,AGG}_TOTAL` | `increase()` over the window |
| row remapping | `DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS` | `increase()`; `DCGM_FI_DEV_ROW_REMAP_FAILURE`, `DCGM_FI_DEV_ROW_REMAP_PENDING` (0/1): the last value |
| PCIe | `DCGM_FI_DEV_PCIE_REPLAY_COUNTER` | `increase()` |
| NVLink | `DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL` | `increase()` |
| utilisation | `DCGM_FI_DEV_GPU_UTIL` (%) per pod | max and average over the straggler window |

The ECC, NVLink and row-remap-pending series are commented out or absent in dcgm-exporter's
default counters file: the fleet's counters CSV must enable them (docs/contracts.md). A series
that is not exported is *unknown*: it proves nothing, neither a fault nor health.

Two limits of the sources, on purpose not papered over:

- `DCGM_FI_DEV_XID_ERRORS` holds the last Xid, so a second Xid of the same number right after the
  first is invisible, and the value may outlive the fault. Evidence is therefore read from the
  node's return to service on (`since`), and an Xid whose first sample is older is history.
- `increase()` of a counter that restarts (driver reload, reboot) counts the increments before
  the restart in the window too; the same `since` keeps a remediated node from being judged on
  the fault it was remediated for.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from controller.errors import PermanentError
from controller.observe.metrics import Prometheus, label_set

TEMP = "DCGM_FI_DEV_GPU_TEMP"
POWER = "DCGM_FI_DEV_POWER_USAGE"
XID = "DCGM_FI_DEV_XID_ERRORS"
UTIL = "DCGM_FI_DEV_GPU_UTIL"
ECC_SBE_VOL = "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"
ECC_DBE_VOL = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
ECC_SBE_AGG = "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL"
ECC_DBE_AGG = "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"
REMAPPED_UNCORRECTABLE = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
ROW_REMAP_PENDING = "DCGM_FI_DEV_ROW_REMAP_PENDING"
PCIE_REPLAY = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"
NVLINK_CRC = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"

COUNTERS = {
    "ecc_sbe_volatile": ECC_SBE_VOL,
    "ecc_dbe_volatile": ECC_DBE_VOL,
    "ecc_sbe_aggregate": ECC_SBE_AGG,
    "ecc_dbe_aggregate": ECC_DBE_AGG,
    "remapped_rows_uncorrectable": REMAPPED_UNCORRECTABLE,
    "pcie_replays": PCIE_REPLAY,
    "nvlink_crc_flit_errors": NVLINK_CRC,
}
"""Counter signal -> series: how much it grew over the window."""
FLAGS = {"row_remap_failure": ROW_REMAP_FAILURE, "row_remap_pending": ROW_REMAP_PENDING}
"""Gauge 0/1 signal -> series: its last value."""

GPU_GROUP = "Hostname, gpu"


@dataclass(kw_only=True)
class GpuSignals:
    """What one GPU showed. None is unknown (no series); a stale GPU's readings are all
    dropped (`fresh` False), so nothing is judged on them."""

    hostname: str
    gpu: str
    uuid: str = ""
    model: str = ""
    fresh: bool = False
    last_seen: float | None = None
    temp_samples: int = 0
    temp_min_c: float | None = None
    temp_max_c: float | None = None
    power_max_w: float | None = None
    xids: dict[int, float] = field(default_factory=dict)
    """Xid -> first time seen in the window (epoch seconds)."""
    counters: dict[str, float] = field(default_factory=dict)
    """Counter signal (COUNTERS) -> increase over the window; absent = unknown."""
    flags: dict[str, float] = field(default_factory=dict)
    """Flag signal (FLAGS) -> last value; absent = unknown."""

    def evidence(self) -> dict[str, Any]:
        """The readings, as logged and as OPA is asked with."""
        return {
            "gpu": self.gpu,
            "uuid": self.uuid,
            "fresh": self.fresh,
            "temp_samples": self.temp_samples,
            "temp_min_c": self.temp_min_c,
            "temp_max_c": self.temp_max_c,
            "power_max_w": self.power_max_w,
            "xids": sorted(self.xids),
            **self.counters,
            **self.flags,
        }


@dataclass(kw_only=True)
class NodeSignals:
    hostname: str
    gpus: dict[str, GpuSignals] = field(default_factory=dict)

    @property
    def fresh(self) -> list[GpuSignals]:
        return [g for g in self.gpus.values() if g.fresh]


@dataclass(frozen=True, kw_only=True)
class Windows:
    """The windows the signals are read over (seconds)."""

    signal: int
    hot_for: int
    stale_after: int
    step: int
    """The subquery step for Xids: the scrape interval."""


def _selector(hostnames: Iterable[str] | None) -> str:
    if hostnames is None:
        return ""
    return f'Hostname=~"{label_set(hostnames)}"'


def _per_gpu(
    prom: Prometheus, promql: str, at: float, *, extra: str | None = None
) -> list[tuple[dict[str, str], float]]:
    out = []
    for series in prom.query(promql, at):
        labels = series.get("metric") if isinstance(series, dict) else None
        sample = series.get("value") if isinstance(series, dict) else None
        if not isinstance(labels, dict) or not isinstance(sample, list) or len(sample) != 2:
            raise PermanentError(
                f"prometheus: malformed series {str(series)[:200]} for {promql[:200]!r}"
            )
        try:
            value = float(sample[1])
        except (TypeError, ValueError) as error:
            raise PermanentError(f"prometheus: malformed value in {str(series)[:200]}") from error
        if extra is not None and extra not in labels:
            continue
        out.append(({k: str(v) for k, v in labels.items()}, value))
    return out


def queries(windows: Windows, hostnames: Iterable[str] | None = None) -> dict[str, str]:
    """Every query of one read, by what it answers. `hostnames` restricts them to these nodes."""
    sel = _selector(hostnames)
    hot = f"[{windows.hot_for}s]"
    win = f"[{windows.signal}s]"
    out = {
        "seen": f"max by ({GPU_GROUP}, UUID, modelName) (timestamp({TEMP}{{{sel}}}))",
        "temp_min": f"min by ({GPU_GROUP}) (min_over_time({TEMP}{{{sel}}}{hot}))",
        "temp_max": f"max by ({GPU_GROUP}) (max_over_time({TEMP}{{{sel}}}{hot}))",
        "temp_count": f"max by ({GPU_GROUP}) (count_over_time({TEMP}{{{sel}}}{hot}))",
        "power_max": f"max by ({GPU_GROUP}) (max_over_time({POWER}{{{sel}}}{win}))",
        # Each distinct non-zero value of the last-Xid gauge becomes a series labelled `xid`; the
        # smallest step time it was present at is when it was first seen.
        "xids": f'min by ({GPU_GROUP}, xid) (min_over_time(timestamp(count_values by ({GPU_GROUP}) ("xid", {XID}{{{sel}}} > 0)){win[:-1]}:{windows.step}s]))',
    }
    for name, metric in COUNTERS.items():
        out[f"counter:{name}"] = f"max by ({GPU_GROUP}) (increase({metric}{{{sel}}}{win}))"
    for name, metric in FLAGS.items():
        out[f"flag:{name}"] = f"max by ({GPU_GROUP}) (last_over_time({metric}{{{sel}}}{win}))"
    return out


def read_signals(
    prom: Prometheus, at: float, windows: Windows, hostnames: Iterable[str] | None = None
) -> dict[str, NodeSignals]:
    """The signals of every GPU that has exported a temperature within the lookback, by node.
    A GPU that exported nothing is absent (unknown); one whose newest sample is older than
    `stale_after` is present but not fresh, with no readings."""
    wanted = queries(windows, hostnames)
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = dict(
            zip(wanted, pool.map(lambda q: _per_gpu(prom, q, at), wanted.values()), strict=True)
        )
    nodes: dict[str, NodeSignals] = {}

    def gpu_of(labels: dict[str, str]) -> GpuSignals | None:
        host, gpu = labels.get("Hostname", ""), labels.get("gpu", "")
        node = nodes.get(host)
        return node.gpus.get(gpu) if node else None

    for labels, stamp in answers["seen"]:
        host, index = labels.get("Hostname", ""), labels.get("gpu", "")
        if not host or not index:
            continue
        node = nodes.setdefault(host, NodeSignals(hostname=host))
        node.gpus[index] = GpuSignals(
            hostname=host,
            gpu=index,
            uuid=labels.get("UUID", ""),
            model=labels.get("modelName", ""),
            fresh=at - stamp <= windows.stale_after,
            last_seen=stamp,
        )
    for key, rows in answers.items():
        if key == "seen":
            continue
        for labels, value in rows:
            gpu = gpu_of(labels)
            if gpu is None or not gpu.fresh:
                continue
            if key == "temp_min":
                gpu.temp_min_c = value
            elif key == "temp_max":
                gpu.temp_max_c = value
            elif key == "temp_count":
                gpu.temp_samples = int(value)
            elif key == "power_max":
                gpu.power_max_w = value
            elif key == "xids":
                try:
                    gpu.xids[int(float(labels.get("xid", "")))] = value
                except ValueError:
                    continue
            elif key.startswith("counter:"):
                gpu.counters[key.split(":", 1)[1]] = value
            elif key.startswith("flag:"):
                gpu.flags[key.split(":", 1)[1]] = value
    return nodes


def pod_utilisation(
    prom: Prometheus, at: float, window_seconds: int
) -> dict[tuple[str, str], tuple[float, float, int]]:
    """Per pod (namespace, name): the peak and the average of its GPUs' utilisation over the
    window, and the samples behind it (the fewest of its GPUs)."""
    window = f"[{int(window_seconds)}s]"
    group = "namespace, pod"
    peak = _per_gpu(prom, f'max by ({group}) (max_over_time({UTIL}{{pod!=""}}{window}))', at)
    mean = _per_gpu(prom, f'avg by ({group}) (avg_over_time({UTIL}{{pod!=""}}{window}))', at)
    count = _per_gpu(prom, f'min by ({group}) (count_over_time({UTIL}{{pod!=""}}{window}))', at)
    out: dict[tuple[str, str], tuple[float, float, int]] = {}
    means = {(m.get("namespace", ""), m.get("pod", "")): v for m, v in mean}
    counts = {(c.get("namespace", ""), c.get("pod", "")): int(v) for c, v in count}
    for labels, value in peak:
        key = (labels.get("namespace", ""), labels.get("pod", ""))
        out[key] = (value, means.get(key, value), counts.get(key, 0))
    return out
