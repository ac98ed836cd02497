"""Read a pod/node trace in the columns of Alibaba's GPU trace 2023 ("openb").

Pods: `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
deletion_time,scheduled_time` (times in seconds from the start of the trace; `scheduled_time`
empty for pods the cluster never scheduled). Nodes: `sn,cpu_milli,memory_mib,gpu,model`.

Only the trace's facts are kept here; everything the trace lacks (teams, workload types,
utilisation, prices) is added by `workloads` and the scenario configuration.
"""

from __future__ import annotations

import csv
import math
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

TRACE_DIR_ENV = "FLEETPLANE_TRACE_DIR"
# The trace ships inside the replay package (package data), so an installed `fleetplane replay`
# finds it wherever it runs; $FLEETPLANE_TRACE_DIR points at another copy or another trace.
PACKAGED_TRACE_DIR = Path(__file__).resolve().parent / "traces" / "alibaba-gpu-v2023"


def default_trace_dir() -> Path:
    """$FLEETPLANE_TRACE_DIR, else the trace shipped with the package."""
    if os.environ.get(TRACE_DIR_ENV):
        return Path(os.environ[TRACE_DIR_ENV])
    return PACKAGED_TRACE_DIR


DEFAULT_TRACE_DIR = default_trace_dir()
DEFAULT_POD_FILE = "openb_pod_list_default.csv"
DEFAULT_NODE_FILE = "openb_node_list_gpu_node.csv"

REQUIRED_POD_COLUMNS = ("name", "num_gpu", "gpu_milli", "qos", "creation_time", "deletion_time")
REQUIRED_NODE_COLUMNS = ("sn", "gpu", "model")
REQUIRED_REQUEST_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
"""What the packing experiment needs of a pod list; lists published for packing experiments
have no times."""


class TraceError(ValueError):
    """The trace cannot be replayed; the message names the file and what is wrong."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TracePod:
    """One pod of the trace, as recorded."""

    name: str
    num_gpu: int
    gpu_milli: int
    qos: str
    phase: str
    created: int
    deleted: int
    scheduled: int | None
    gpu_spec: tuple[str, ...] = ()
    cpu_milli: int = 0
    memory_mib: int = 0

    @property
    def shared(self) -> bool:
        """A GPU-sharing pod: one GPU, less than all of it (`gpu_milli` < 1000)."""
        return self.num_gpu == 1 and 0 < self.gpu_milli < 1000

    @property
    def gpus(self) -> int:
        """Whole GPUs the replay gives the pod: a sharing pod gets one."""
        return self.num_gpu

    @property
    def run_seconds(self) -> int:
        """How long it held its GPUs in the traced cluster: from scheduling (else creation,
        for pods never scheduled, which waited that long) to deletion."""
        start = self.scheduled if self.scheduled is not None else self.created
        return self.deleted - start


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceNode:
    name: str
    gpus: int
    model: str
    cpu_milli: int = 0
    memory_mib: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class PodRequest:
    """What one pod of a pod list asks for, times aside (the packing experiment's input):
    CPU-only pods too, since they take CPU and memory from GPU nodes."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    """Per GPU: 1000 for whole GPUs, less for a share of one GPU, 0 without GPUs."""
    gpu_spec: tuple[str, ...] = ()
    """GPU models the pod accepts; empty for any."""

    @property
    def shared(self) -> bool:
        return self.num_gpu == 1 and 0 < self.gpu_milli < 1000

    @property
    def gpu_milli_total(self) -> int:
        return self.num_gpu * self.gpu_milli


@dataclass(kw_only=True)
class Trace:
    """The GPU pods of a trace (sorted by creation time), its CPU-only pods and its GPU
    nodes."""

    source: str
    pods: list[TracePod]
    nodes: list[TraceNode]
    skipped: dict[str, int] = field(default_factory=dict)
    """Pods left out and why (`no-lifetime`)."""
    cpu_pods: list[TracePod] = field(default_factory=list)
    """The pods that ask for no GPU (sorted by creation time): the trace's cluster ran them on
    its GPU nodes, where they take CPU and memory the GPU pods need too."""

    @property
    def start(self) -> int:
        return min(p.created for p in self.pods)

    @property
    def end(self) -> int:
        """The horizon: the last deletion in the trace."""
        return max(p.deleted for p in self.pods)

    @property
    def node_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    def gpus_per_node(self) -> int:
        """The node size that holds most of the trace cluster's GPUs (8 for the default trace);
        1 when the trace lists no GPU nodes."""
        by_size: Counter[int] = Counter()
        for node in self.nodes:
            by_size[node.gpus] += node.gpus
        return by_size.most_common(1)[0][0] if by_size else 1

    def peak_gpus(self) -> int:
        """Most whole GPUs the pods held at once in the traced cluster (creation to deletion)."""
        changes: list[tuple[int, int]] = []
        for pod in self.pods:
            changes.append((pod.created, pod.gpus))
            changes.append((pod.deleted, -pod.gpus))
        changes.sort(key=lambda c: (c[0], c[1]))
        held = peak = 0
        for _, delta in changes:
            held += delta
            peak = max(peak, held)
        return peak

    def peak_nodes(self, gpus_per_node: int | None = None) -> int:
        per_node = gpus_per_node or self.gpus_per_node()
        return max(1, math.ceil(self.peak_gpus() / per_node))

    def arrival_quantile(self, fraction: float) -> int:
        """Creation time by which `fraction` of the GPU pods had arrived."""
        times = sorted(p.created for p in self.pods)
        index = min(len(times) - 1, max(0, math.ceil(fraction * len(times)) - 1))
        return times[index]


def _int(row: dict[str, str], key: str, path: Path, line: int, default: int | None = None) -> int:
    value = (row.get(key) or "").strip()
    if value == "":
        if default is not None:
            return default
        raise TraceError(f"{path}:{line}: column {key} is empty")
    try:
        return int(float(value))
    except ValueError:
        raise TraceError(f"{path}:{line}: column {key} is not a number: {value!r}") from None


def _check_columns(path: Path, header: Sequence[str] | None, required: tuple[str, ...]) -> None:
    missing = [c for c in required if c not in (header or [])]
    if missing:
        untimed = all(c in (header or []) for c in REQUIRED_REQUEST_COLUMNS)
        hint = (
            "; a list without times is for packing: `fleetplane replay --mode pack`"
            if untimed and required == REQUIRED_POD_COLUMNS
            else ""
        )
        raise TraceError(
            f"{path}: missing column(s) {', '.join(missing)}; a replay needs "
            f"{', '.join(required)} (times in seconds from the start of the trace){hint}"
        )


def read_pod_rows(path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """The pod list's rows as read (line number, columns), in file order, after checking that
    the columns the replay needs are there: the one reader of the trace's pod lists."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        _check_columns(path, reader.fieldnames, REQUIRED_POD_COLUMNS)
        yield from enumerate(reader, start=2)


def read_pods(path: Path) -> tuple[list[TracePod], dict[str, int]]:
    """The GPU pods of a pod list, and the pods left out and why (`cpu-only` among them)."""
    pods, cpu_pods, skipped = read_all_pods(path)
    return pods, ({"cpu-only": len(cpu_pods)} if cpu_pods else {}) | skipped


def read_all_pods(path: Path) -> tuple[list[TracePod], list[TracePod], dict[str, int]]:
    """The GPU pods and the CPU-only pods of a pod list (each sorted by creation time), and
    the pods left out and why (`no-lifetime`)."""
    pods: list[TracePod] = []
    cpu_pods: list[TracePod] = []
    skipped: Counter[str] = Counter()
    for line, row in read_pod_rows(path):
        num_gpu = max(0, _int(row, "num_gpu", path, line))
        scheduled_raw = (row.get("scheduled_time") or "").strip()
        pod = TracePod(
            name=row["name"],
            num_gpu=num_gpu,
            gpu_milli=_int(row, "gpu_milli", path, line, default=1000) if num_gpu else 0,
            qos=(row.get("qos") or "").strip() or "BE",
            phase=(row.get("pod_phase") or "").strip() or "Running",
            created=_int(row, "creation_time", path, line),
            deleted=_int(row, "deletion_time", path, line),
            scheduled=_int(row, "scheduled_time", path, line) if scheduled_raw else None,
            gpu_spec=tuple(s for s in (row.get("gpu_spec") or "").split("|") if s),
            cpu_milli=_int(row, "cpu_milli", path, line, default=0),
            memory_mib=_int(row, "memory_mib", path, line, default=0),
        )
        if pod.run_seconds <= 0 or pod.deleted <= pod.created:
            skipped["no-lifetime"] += 1
            continue
        (pods if num_gpu else cpu_pods).append(pod)
    pods.sort(key=lambda p: (p.created, p.name))
    cpu_pods.sort(key=lambda p: (p.created, p.name))
    return pods, cpu_pods, dict(skipped)


def read_nodes(path: Path) -> list[TraceNode]:
    nodes: list[TraceNode] = []
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        _check_columns(path, reader.fieldnames, REQUIRED_NODE_COLUMNS)
        for line, row in enumerate(reader, start=2):
            gpus = _int(row, "gpu", path, line, default=0)
            if gpus > 0:
                nodes.append(
                    TraceNode(
                        name=row["sn"],
                        gpus=gpus,
                        model=row.get("model") or "",
                        cpu_milli=_int(row, "cpu_milli", path, line, default=0),
                        memory_mib=_int(row, "memory_mib", path, line, default=0),
                    )
                )
    return nodes


def read_pod_requests(path: Path) -> list[PodRequest]:
    """Every pod of a pod list, in file order, as resource requests (no times needed)."""
    if not path.is_file():
        raise TraceError(f"{path}: no such pod list")
    pods: list[PodRequest] = []
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        _check_columns(path, reader.fieldnames, REQUIRED_REQUEST_COLUMNS)
        for line, row in enumerate(reader, start=2):
            num_gpu = _int(row, "num_gpu", path, line)
            pods.append(
                PodRequest(
                    name=row["name"],
                    cpu_milli=_int(row, "cpu_milli", path, line),
                    memory_mib=_int(row, "memory_mib", path, line),
                    num_gpu=num_gpu,
                    gpu_milli=_int(row, "gpu_milli", path, line) if num_gpu > 0 else 0,
                    gpu_spec=tuple(s for s in (row.get("gpu_spec") or "").split("|") if s),
                )
            )
    if not pods:
        raise TraceError(f"{path}: no pods")
    return pods


def load_trace(
    directory: Path = DEFAULT_TRACE_DIR,
    *,
    pod_file: str = DEFAULT_POD_FILE,
    node_file: str = DEFAULT_NODE_FILE,
) -> Trace:
    """The GPU pods, CPU-only pods and GPU nodes of a trace directory. The node list is optional (without
    it, pools get the node size of the scenario configuration)."""
    pod_path = directory / pod_file
    if not pod_path.is_file():
        raise TraceError(f"{pod_path}: no such pod list")
    pods, cpu_pods, skipped = read_all_pods(pod_path)
    if not pods:
        raise TraceError(f"{pod_path}: no pod requests a GPU")
    node_path = directory / node_file
    nodes = read_nodes(node_path) if node_path.is_file() else []
    return Trace(source=str(pod_path), pods=pods, nodes=nodes, skipped=skipped, cpu_pods=cpu_pods)
