"""The summary of one pass: counters and gauges, printed at the end, written to a Prometheus
textfile (`--metrics-file`, for node-exporter's textfile collector or a sidecar) and optionally
pushed to a Pushgateway (`--pushgateway URL`).

Metrics (all gauges describing the last pass):

    fleetplane_controller_last_pass_timestamp_seconds
    fleetplane_controller_last_pass_duration_seconds
    fleetplane_controller_last_pass_success               1, or 0 when any error occurred
    fleetplane_controller_dry_run                         1 under --dry-run
    fleetplane_controller_api_requests                    Kubernetes API requests made
    fleetplane_controller_observed{kind}                  nodes, accelerator_pods, ...
    fleetplane_controller_idle_pods{verdict}              pods per idle verdict
    fleetplane_controller_actions{concern,action,outcome} outcome: done, dry-run, denied,
                                                          blocked, skipped, failed
    fleetplane_controller_team_spend_usd{team}            month-to-date
    fleetplane_controller_team_budget_ratio{team}         spend / monthly budget
    fleetplane_controller_preemptors{state}               planned, waiting
    fleetplane_controller_errors{concern,kind}            kind: temporary, permanent
    fleetplane_controller_service_requests{service}       prometheus, opa
    fleetplane_controller_peak_memory_bytes               peak resident memory of the process
    fleetplane_controller_phase_seconds{phase}            observe, idle, spend, preempt
    fleetplane_controller_gc_seconds                      Python's cyclic GC during the pass
"""

from __future__ import annotations

import os
import resource
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from controller.errors import TemporaryError

PREFIX = "fleetplane_controller_"
_LOCK = threading.Lock()
HELP = {
    "last_pass_timestamp_seconds": "End of the last pass, epoch seconds.",
    "last_pass_duration_seconds": "Wall time of the last pass.",
    "last_pass_success": "1 when the last pass had no error.",
    "dry_run": "1 when the last pass ran with --dry-run.",
    "api_requests": "Kubernetes API requests made by the last pass.",
    "observed": "Objects in the last pass's snapshot.",
    "idle_pods": "Accelerator pods per idle verdict in the last pass.",
    "actions": "Actions of the last pass per concern, action and outcome.",
    "team_spend_usd": "Month-to-date accelerator spend per team, USD.",
    "team_budget_ratio": "Month-to-date spend over the team's monthly budget.",
    "preemptors": "Waiting workloads per preemption state in the last pass.",
    "errors": "Errors in the last pass per concern and kind.",
    "service_requests": "Requests the last pass made to Prometheus and OPA.",
    "peak_memory_bytes": "Peak resident memory of the controller process.",
    "phase_seconds": "Wall time of each phase of the last pass (observe, idle, spend, preempt).",
    "gc_seconds": "Time the last pass spent in Python's cyclic garbage collector.",
}

Labels = tuple[tuple[str, str], ...]


@dataclass
class Summary:
    started: float = field(default_factory=time.time)
    dry_run: bool = False
    values: dict[tuple[str, Labels], float] = field(default_factory=dict)
    skipped: str | None = None
    finished: float | None = None

    def inc(self, name: str, amount: float = 1, **labels: str) -> None:
        key = (name, tuple(sorted(labels.items())))
        with _LOCK:  # actions run in parallel threads
            self.values[key] = self.values.get(key, 0) + amount

    def set(self, name: str, value: float, **labels: str) -> None:
        self.values[(name, tuple(sorted(labels.items())))] = value

    def get(self, name: str, **labels: str) -> float:
        return self.values.get((name, tuple(sorted(labels.items()))), 0)

    def action(self, concern: str, action: str, outcome: str) -> None:
        self.inc("actions", concern=concern, action=action, outcome=outcome)

    def error(self, concern: str, kind: str) -> None:
        self.inc("errors", concern=concern, kind=kind)

    @property
    def errors(self) -> float:
        return sum(v for (name, _), v in self.values.items() if name == "errors")

    def finish(self, api_requests: int) -> None:
        self.finished = time.time()
        self.set("peak_memory_bytes", peak_memory_bytes())
        self.set("api_requests", api_requests)
        self.set("last_pass_timestamp_seconds", round(self.finished, 3))
        self.set("last_pass_duration_seconds", round(self.finished - self.started, 3))
        self.set("last_pass_success", 0 if self.errors else 1)
        self.set("dry_run", 1 if self.dry_run else 0)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for (name, labels), value in sorted(self.values.items()):
            key = name if not labels else name + "{" + ",".join(f"{k}={v}" for k, v in labels) + "}"
            out[key] = value
        if self.skipped:
            out["skipped"] = self.skipped
        return out

    def exposition(self) -> str:
        """Prometheus text exposition format, one family per metric name."""
        families: dict[str, list[tuple[Labels, float]]] = {}
        for (name, labels), value in sorted(self.values.items()):
            families.setdefault(name, []).append((labels, value))
        lines: list[str] = []
        for name, samples in families.items():
            full = PREFIX + name
            lines.append(f"# HELP {full} {HELP.get(name, name)}")
            lines.append(f"# TYPE {full} gauge")
            for labels, value in samples:
                rendered = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
                lines.append(f"{full}{{{rendered}}} {value:g}" if rendered else f"{full} {value:g}")
        return "\n".join(lines) + "\n"

    def write_textfile(self, path: Path) -> None:
        """Atomically (write then rename), so a collector never reads half a file."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".fleetplane-", dir=path.parent)
        with os.fdopen(fd, "w") as handle:
            handle.write(self.exposition())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)

    def push(
        self, gateway: str, *, job: str = "fleetplane-controller", timeout: float = 10
    ) -> None:
        url = f"{gateway.rstrip('/')}/metrics/job/{job}"
        try:
            response = requests.put(
                url,
                data=self.exposition().encode(),
                headers={"Content-Type": "text/plain; version=0.0.4"},
                timeout=timeout,
            )
        except requests.RequestException as error:
            raise TemporaryError(f"pushgateway {url}: {error}") from error
        if response.status_code >= 300:
            raise TemporaryError(f"pushgateway {url}: HTTP {response.status_code}")


def peak_memory_bytes() -> int:
    """Peak resident memory of this process since it started its program: VmHWM on Linux.
    ru_maxrss is not that: it keeps the high-water mark of the process image exec replaced, and
    a child started with vfork (subprocess) inherits its parent's, so a large parent would be
    reported as the controller's peak."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    # ru_maxrss is in KiB on Linux (elsewhere bytes; this is only the fallback).
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
