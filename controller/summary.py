"""The summary of one pass: what it saw, did and cost, printed at the end, written to a
Prometheus textfile (`--metrics-file`, for node-exporter's textfile collector or a sidecar) and
pushed to a Pushgateway (`controller.pushgateway_url` of the configuration, or `--pushgateway`).

Every metric is listed, with its type, labels and unit, in docs/contracts.md ("Controller
metrics"); `FAMILIES` below is the same list in code. Gauges describe the last pass. Counters
(`*_total`) and the queue-wait histogram count across passes: each run is a new process, so
the previous values are read back from where they are published (the Pushgateway's group of
this job, or the textfile) and this pass's increments added. A counter series is declared at 0
(`declare`) from the first pass that sees what it may count (a team's running work for the
reclaim counters, a considered action for its refusals, every concern for its errors), because
Prometheus' `increase` cannot see the first value of a series that is born non-zero: the first
reclaim of a team would be lost from every dashboard and report. When the Pushgateway restarts
empty, the counters start again from zero, which Prometheus' `rate`/`increase` read as a
counter reset, as they should.

Publishing is the end of a pass, never part of it: a Pushgateway that is down or slow
(`PUSH_TIMEOUT_SECONDS`) costs the pass nothing but a logged `summary.push.failed`, and the
exit status stays the pass's own (controller/cli.py).
"""

from __future__ import annotations

import math
import os
import re
import resource
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from controller.errors import TemporaryError

_LOCK = threading.Lock()
PUSH_JOB = "fleetplane-controller"
PUSH_TIMEOUT_SECONDS = 5.0

ERROR_KINDS = ("temporary", "permanent")
"""The `kind` label of `fleetplane_controller_errors_total` (controller.errors)."""

QUEUE_WAIT_BUCKETS = (30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0)
"""Upper bounds (seconds) of the queue-wait histogram's buckets; +Inf is added."""

REFUSALS = {"denied": "policy", "held": "guarantee", "blocked": "disruption-budget"}
"""Action outcomes that are refusals, and the reason label they are counted under: OPA said no
(`policy`), the team's guaranteed share holds the GPUs (`guarantee`), a PodDisruptionBudget or
the room left blocks it (`disruption-budget`)."""


@dataclass(frozen=True, slots=True)
class Family:
    """name: the exposed metric name; kind: gauge, counter or histogram; help: its HELP."""

    name: str
    kind: str
    help: str


FAMILIES: dict[str, Family] = {
    # the pass
    "last_pass_timestamp_seconds": Family(
        "fleetplane_controller_last_pass_timestamp_seconds", "gauge", "End of the last pass."
    ),
    "last_pass_duration_seconds": Family(
        "fleetplane_controller_pass_duration_seconds", "gauge", "Wall time of the last pass."
    ),
    "last_pass_success": Family(
        "fleetplane_controller_last_pass_success", "gauge", "1 when the last pass had no error."
    ),
    "passes": Family(
        "fleetplane_controller_passes_total",
        "counter",
        "Passes by outcome: success, failed (an error), skipped (another pass held the Lease).",
    ),
    "dry_run": Family(
        "fleetplane_controller_dry_run", "gauge", "1 when the last pass ran with --dry-run."
    ),
    "api_requests": Family(
        "fleetplane_controller_api_requests",
        "gauge",
        "Kubernetes API requests made by the last pass.",
    ),
    "observed": Family(
        "fleetplane_controller_observed", "gauge", "Objects in the last pass's snapshot."
    ),
    "idle_pods": Family(
        "fleetplane_controller_idle_pods",
        "gauge",
        "Accelerator pods per idle verdict in the last pass.",
    ),
    "lifetime_pods": Family(
        "fleetplane_controller_lifetime_pods",
        "gauge",
        "Accelerator pods per lifetime check (max-runtime, orphan, straggler) and verdict in the last pass.",
    ),
    "disruption_answers": Family(
        "fleetplane_controller_disruption_answers",
        "gauge",
        "Running accelerator pods the last pass asked the disruption policy about (asked), "
        "and those whose answer kept from an earlier pass still held (kept).",
    ),
    "preemptors": Family(
        "fleetplane_controller_preemptors",
        "gauge",
        "Waiting workloads per preemption state in the last pass.",
    ),
    "service_requests": Family(
        "fleetplane_controller_service_requests",
        "gauge",
        "Requests the last pass made to Prometheus and OPA.",
    ),
    "peak_memory_bytes": Family(
        "fleetplane_controller_peak_memory_bytes",
        "gauge",
        "Peak resident memory of the controller process.",
    ),
    "phase_seconds": Family(
        "fleetplane_controller_phase_seconds",
        "gauge",
        "Wall time of each phase of the last pass (observe, idle, spend, preempt).",
    ),
    "gc_seconds": Family(
        "fleetplane_controller_gc_seconds",
        "gauge",
        "Time the last pass spent in Python's cyclic garbage collector.",
    ),
    # decisions
    "actions": Family(
        "fleetplane_controller_actions_total",
        "counter",
        "Actions per concern, action and outcome (done, dry-run, denied, held, blocked, "
        "changed, gone, failed).",
    ),
    "refusals": Family(
        "fleetplane_controller_refusals_total",
        "counter",
        "Actions not taken per concern, action and reason (policy, guarantee, disruption-budget).",
    ),
    "errors": Family(
        "fleetplane_controller_errors_total",
        "counter",
        "Errors per concern and kind (temporary, permanent).",
    ),
    # the fleet
    "pool_accelerators": Family(
        "fleetplane_pool_accelerators",
        "gauge",
        "Accelerators per pool, model and state: allocatable (Ready, schedulable nodes), "
        "unavailable (cordoned or NotReady nodes), in-use (held by running pods).",
    ),
    "pool_fragmented": Family(
        "fleetplane_pool_fragmented_accelerators",
        "gauge",
        "Free accelerators per pool, model and capacity type that the fleet's typical pods "
        "cannot use (Weng et al.'s fragmentation, ATC 2023), in the last pass.",
    ),
    # teams
    "team_gpus": Family(
        "fleetplane_team_gpus",
        "gauge",
        "Accelerators (GPUs, TPU chips: see `resource`) of a team's pods per state: held "
        "(running), idle (judged idle: warned or due), pending (requested, not yet placed).",
    ),
    "namespace_team": Family(
        "fleetplane_namespace_team",
        "gauge",
        "1 for each team namespace, labelled with its team: joins pod-level series (DCGM) to teams.",
    ),
    "team_quota_gpus": Family(
        "fleetplane_team_quota_gpus", "gauge", "A team's quota of accelerators per resource."
    ),
    "team_pods": Family(
        "fleetplane_team_pods",
        "gauge",
        "Accelerator pods of a team per workload type and state (running, pending).",
    ),
    "team_cost_rate": Family(
        "fleetplane_team_cost_usd_per_hour",
        "gauge",
        "What a team's running accelerator pods cost per hour, at the configured prices.",
    ),
    "team_burst_gpus": Family(
        "fleetplane_team_burst_gpus",
        "gauge",
        "Accelerators a team's running pods hold on burst nodes (label fleetplane.dev/burst-tier), "
        "per tier and model; the bill integrates it into burst GPU-hours.",
    ),
    "team_spend_usd": Family(
        "fleetplane_team_spend_usd", "gauge", "Month-to-date accelerator spend of a team, USD."
    ),
    "team_budget_usd": Family(
        "fleetplane_team_budget_usd", "gauge", "Monthly accelerator budget of a team, USD."
    ),
    "team_budget_ratio": Family(
        "fleetplane_team_budget_ratio",
        "gauge",
        "Month-to-date spend over the team's monthly budget.",
    ),
    "reclaimed_gpus": Family(
        "fleetplane_team_reclaimed_gpus_total",
        "counter",
        "Accelerators freed by reclaiming idle workloads.",
    ),
    "reclaimed_gpu_hours": Family(
        "fleetplane_team_reclaimed_gpu_hours_total",
        "counter",
        "Idle accelerator-hours ended by reclaims: devices x the idle window the evidence "
        "covered (what one more window idle would have held).",
    ),
    "reclaim_savings_usd": Family(
        "fleetplane_team_reclaim_savings_usd_total",
        "counter",
        "Spend avoided by reclaims, estimated as the reclaimed GPU-hours at their price.",
    ),
    "queue_wait": Family(
        "fleetplane_queue_wait_seconds",
        "histogram",
        "Time accelerator pods waited from creation to running, per team and workload type.",
    ),
    "queue_oldest": Family(
        "fleetplane_queue_oldest_wait_seconds",
        "gauge",
        "How long the oldest pending accelerator pod has waited so far.",
    ),
    # the driver-upgrade pass (job fleetplane-controller-upgrade)
    "upgrade_nodes": Family(
        "fleetplane_controller_upgrade_nodes",
        "gauge",
        "Nodes of each upgrade pool in the last upgrade pass.",
    ),
    "upgrade_states": Family(
        "fleetplane_controller_upgrade_states",
        "gauge",
        "Nodes of each upgrade pool per rollout state in the last upgrade pass.",
    ),
    "upgrade_halted": Family(
        "fleetplane_controller_upgrade_halted",
        "gauge",
        "1 when the pool's rollout is halted (a node failed its upgrade or validation).",
    ),
    # the GPU-remediation pass (job fleetplane-controller-health)
    "health_states": Family(
        "fleetplane_controller_health_states",
        "gauge",
        "Nodes of each pool per health state (quarantined .. needs-replacement) in the last health pass.",
    ),
    "health_waiting": Family(
        "fleetplane_controller_health_waiting",
        "gauge",
        "Faulty nodes of each pool not yet taken out (no room, or the driver upgrade holds them) in the last health pass.",
    ),
    "health_gpu_hours_out_of_service": Family(
        "fleetplane_controller_health_gpu_hours_out_of_service",
        "gauge",
        "GPU-hours a node returned by the last health pass spent out of service.",
    ),
    "health_gpu_hours_of_work_lost": Family(
        "fleetplane_controller_health_gpu_hours_of_work_lost",
        "gauge",
        "GPU-hours of running work a node returned by the last health pass lost to its fault.",
    ),
}

Labels = tuple[tuple[str, str], ...]
Series = dict[tuple[str, Labels], float]
"""Exposed series: (metric name with any _bucket/_sum/_count suffix, labels) -> value."""

_ACCUMULATED = {f.name for f in FAMILIES.values() if f.kind in ("counter", "histogram")}


@dataclass
class _Histogram:
    buckets: list[int]
    total: float = 0.0
    count: int = 0


@dataclass
class Summary:
    started: float = field(default_factory=time.time)
    dry_run: bool = False
    values: dict[tuple[str, Labels], float] = field(default_factory=dict)
    histograms: dict[tuple[str, Labels], _Histogram] = field(default_factory=dict)
    skipped: str | None = None
    finished: float | None = None

    def inc(self, name: str, amount: float = 1, **labels: str) -> None:
        key = (name, tuple(sorted(labels.items())))
        with _LOCK:  # actions run in parallel threads
            self.values[key] = self.values.get(key, 0) + amount

    def declare(self, name: str, **labels: str) -> None:
        """Make a counter or histogram series exist, at 0 when it is new, without counting."""
        key = (name, tuple(sorted(labels.items())))
        with _LOCK:
            if FAMILIES[name].kind == "histogram":
                if key not in self.histograms:
                    self.histograms[key] = _Histogram([0] * len(QUEUE_WAIT_BUCKETS))
            else:
                self.values.setdefault(key, 0)

    def set(self, name: str, value: float, **labels: str) -> None:
        self.values[(name, tuple(sorted(labels.items())))] = value

    def get(self, name: str, **labels: str) -> float:
        return self.values.get((name, tuple(sorted(labels.items()))), 0)

    def observe(self, name: str, value: float, **labels: str) -> None:
        """One observation of a histogram (`queue_wait`)."""
        key = (name, tuple(sorted(labels.items())))
        with _LOCK:
            histogram = self.histograms.get(key)
            if histogram is None:
                histogram = self.histograms[key] = _Histogram([0] * len(QUEUE_WAIT_BUCKETS))
            for index, bound in enumerate(QUEUE_WAIT_BUCKETS):
                if value <= bound:
                    histogram.buckets[index] += 1
            histogram.total += value
            histogram.count += 1

    def action(self, concern: str, action: str, outcome: str) -> None:
        self.inc("actions", concern=concern, action=action, outcome=outcome)
        for refusal in REFUSALS.values():
            self.declare("refusals", concern=concern, action=action, reason=refusal)
        reason = REFUSALS.get(outcome)
        if reason is not None:
            self.inc("refusals", concern=concern, action=action, reason=reason)

    def declare_errors(self, concern: str) -> None:
        for kind in ERROR_KINDS:
            self.declare("errors", concern=concern, kind=kind)

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
        outcome = "skipped" if self.skipped else "failed" if self.errors else "success"
        self.inc("passes", outcome=outcome)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for (name, labels), value in sorted(self.values.items()):
            key = name if not labels else name + "{" + ",".join(f"{k}={v}" for k, v in labels) + "}"
            out[key] = value
        for (name, labels), histogram in sorted(self.histograms.items()):
            key = name if not labels else name + "{" + ",".join(f"{k}={v}" for k, v in labels) + "}"
            out[key] = {"count": histogram.count, "sum": round(histogram.total, 3)}
        if self.skipped:
            out["skipped"] = self.skipped
        return out

    def series(self, previous: Series | None = None) -> dict[str, Series]:
        """Every exposed series by family name: this pass's gauges, and the counters and
        histograms added to their `previous` values (those of earlier passes)."""
        out: dict[str, Series] = {}
        for (name, labels), value in self.values.items():
            family = FAMILIES.get(name) or Family(f"fleetplane_controller_{name}", "gauge", name)
            out.setdefault(family.name, {})[(family.name, labels)] = value
        for (name, labels), histogram in self.histograms.items():
            family = FAMILIES[name]
            found = out.setdefault(family.name, {})
            for bound, count in zip(QUEUE_WAIT_BUCKETS, histogram.buckets, strict=True):
                le = tuple(sorted((*labels, ("le", _number(bound)))))
                found[(f"{family.name}_bucket", le)] = count
            found[(f"{family.name}_bucket", tuple(sorted((*labels, ("le", "+Inf")))))] = (
                histogram.count
            )
            found[(f"{family.name}_sum", labels)] = histogram.total
            found[(f"{family.name}_count", labels)] = histogram.count
        for (metric, labels), value in (previous or {}).items():
            family_name = _family_of(metric)
            if family_name not in _ACCUMULATED:
                continue
            found = out.setdefault(family_name, {})
            found[(metric, labels)] = found.get((metric, labels), 0.0) + value
        return out

    def exposition(self, previous: Series | None = None) -> str:
        """Prometheus text exposition format, one family per metric name (see `series`)."""
        kinds = {f.name: f for f in FAMILIES.values()}
        lines: list[str] = []
        for family_name, samples in sorted(self.series(previous).items()):
            family = kinds.get(family_name) or Family(family_name, "gauge", family_name)
            lines.append(f"# HELP {family_name} {family.help}")
            lines.append(f"# TYPE {family_name} {family.kind}")
            for (metric, labels), value in sorted(samples.items(), key=_sample_order):
                rendered = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
                text = f"{metric}{{{rendered}}}" if rendered else metric
                lines.append(f"{text} {_number(value)}")
        return "\n".join(lines) + "\n"

    def write_textfile(self, path: Path) -> None:
        """Atomically (write then rename), so a collector never reads half a file; counters
        continue from the file's previous values."""
        previous: Series = {}
        if path.exists():
            previous = parse_exposition(path.read_text(errors="replace"))
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".fleetplane-", dir=path.parent)
        with os.fdopen(fd, "w") as handle:
            handle.write(self.exposition(previous))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)

    def push(
        self, gateway: str, *, job: str = PUSH_JOB, timeout: float = PUSH_TIMEOUT_SECONDS
    ) -> None:
        """Replace this job's group on the Pushgateway, counters continued from the group's
        current values; TemporaryError when the Pushgateway cannot be read or written."""
        base = gateway.rstrip("/")
        url = f"{base}/metrics/job/{job}"
        try:
            current = requests.get(f"{base}/metrics", timeout=timeout)
            if current.status_code >= 300:
                raise TemporaryError(f"pushgateway {base}/metrics: HTTP {current.status_code}")
            previous = parse_exposition(current.text, group={"job": job})
            response = requests.put(
                url,
                data=self.exposition(previous).encode(),
                headers={"Content-Type": "text/plain; version=0.0.4"},
                timeout=timeout,
            )
        except requests.RequestException as error:
            raise TemporaryError(f"pushgateway {url}: {error}") from error
        if response.status_code >= 300:
            raise TemporaryError(
                f"pushgateway {url}: HTTP {response.status_code}: {response.text[:300]}"
            )


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_exposition(text: str, *, group: dict[str, str] | None = None) -> Series:
    """The samples of a text exposition. With `group`, only the samples carrying those labels
    (a Pushgateway group), with the grouping labels and the `instance=""` the Pushgateway adds
    removed."""
    out: Series = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line.strip())
        if match is None:
            continue
        name, body, raw = match.groups()
        labels = {k: _unescape(v) for k, v in _LABEL.findall(body or "")}
        if group is not None:
            if any(labels.get(k) != v for k, v in group.items()):
                continue
            for key in group:
                labels.pop(key, None)
            if labels.get("instance") == "":
                labels.pop("instance")
        try:
            value = float(raw)
        except ValueError:
            continue
        out[(name, tuple(sorted(labels.items())))] = value
    return out


def _family_of(metric: str) -> str:
    for suffix in ("_bucket", "_sum", "_count"):
        if metric.endswith(suffix) and metric.removesuffix(suffix) in _ACCUMULATED:
            return metric.removesuffix(suffix)
    return metric


def _sample_order(item: tuple[tuple[str, Labels], float]) -> tuple[Any, ...]:
    (metric, labels), _ = item
    plain = tuple((k, v) for k, v in labels if k != "le")
    le = dict(labels).get("le")
    bound = math.inf if le in (None, "+Inf") else float(le)
    return (plain, metric != f"{_family_of(metric)}_bucket", bound, metric)


def _number(value: float) -> str:
    if value == math.inf:
        return "+Inf"
    return f"{value:.17g}" if value != int(value) else f"{int(value)}"


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


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)
