"""What the trace lacks, generated from a fixed seed: workload type, team, priority, checkpoints
and GPU utilisation over each pod's life.

Every number here is an assumption, listed in the report next to the results (`describe`).
The utilisation model is calibrated to published fleet figures (`CALIBRATION_TARGETS`) and the
report prints what the generated fleet achieves against them (`calibration`).

Utilisation is a function of a pod's *progress* (seconds of running), not of wall time, so a
pod that is interrupted and resumed continues its profile where it stopped. A profile is a
sequence of segments of constant utilisation: a pod is either *inert* (0 % for its whole life,
the third of instances the PAI 2020 re-analysis finds at 0 %) or alternates *active* phases (at
a per-pod level, capped by the pod's GPU share) and *pauses* at 0 %.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from replay.trace import TracePod

WORKLOAD_TYPES = ("training", "inference", "notebook", "batch")


@dataclass(frozen=True, slots=True)
class Profile:
    """Utilisation (percent of the pod's GPUs) over progress: segment i covers
    [ends[i-1], ends[i]) at utils[i]; the last end is the pod's run time."""

    ends: tuple[float, ...]
    utils: tuple[float, ...]
    util_cum: tuple[float, ...]
    busy_cum: tuple[float, ...]

    @classmethod
    def of(cls, segments: Iterable[tuple[float, float]]) -> Profile:
        """From (length seconds, util percent) pairs; adjacent equal levels are merged."""
        ends: list[float] = []
        utils: list[float] = []
        at = 0.0
        for length, util in segments:
            if length <= 0:
                continue
            at += length
            if utils and utils[-1] == util:
                ends[-1] = at
            else:
                ends.append(at)
                utils.append(float(util))
        if not ends:
            raise ValueError("a profile needs at least one segment of positive length")
        util_cum: list[float] = []
        busy_cum: list[float] = []
        start = u = b = 0.0
        for end, util in zip(ends, utils, strict=True):
            u += (end - start) * util
            b += (end - start) if util > 0 else 0.0
            util_cum.append(u)
            busy_cum.append(b)
            start = end
        return cls(tuple(ends), tuple(utils), tuple(util_cum), tuple(busy_cum))

    @classmethod
    def constant(cls, seconds: float, util: float) -> Profile:
        return cls.of([(seconds, util)])

    @property
    def duration(self) -> float:
        return self.ends[-1]

    def _index(self, p: float) -> int:
        return min(bisect.bisect_right(self.ends, p), len(self.ends) - 1)

    def util_at(self, p: float) -> float:
        return self.utils[self._index(p)]

    def max_between(self, p0: float, p1: float) -> float:
        """Peak utilisation over progress [p0, p1]."""
        i, j = self._index(max(0.0, p0)), self._index(p1)
        if i == j:
            return self.utils[i]
        return max(self.utils[i : j + 1])

    def _cumulative(self, cum: tuple[float, ...], p: float, busy: bool) -> float:
        p = min(max(p, 0.0), self.duration)
        i = bisect.bisect_right(self.ends, p)
        if i >= len(self.ends):
            return cum[-1]
        before = cum[i - 1] if i > 0 else 0.0
        start = self.ends[i - 1] if i > 0 else 0.0
        rate = (1.0 if self.utils[i] > 0 else 0.0) if busy else self.utils[i]
        return before + (p - start) * rate

    def integral(self, p0: float, p1: float) -> tuple[float, float]:
        """(∫ utilisation percent dp, seconds at utilisation above 0) over [p0, p1]."""
        if p1 <= p0:
            return 0.0, 0.0
        return (
            self._cumulative(self.util_cum, p1, False) - self._cumulative(self.util_cum, p0, False),
            self._cumulative(self.busy_cum, p1, True) - self._cumulative(self.busy_cum, p0, True),
        )

    def next_busy(self, p: float) -> float | None:
        """The first progress at or after p where utilisation is above 0, or None."""
        i = bisect.bisect_right(self.ends, p)
        if i < len(self.ends) and self.utils[i] > 0:
            return p
        for k in range(i + 1, len(self.ends)):
            if self.utils[k] > 0:
                return self.ends[k - 1]
        return None


@dataclass(frozen=True, kw_only=True)
class Shape:
    """How one workload type uses its GPUs.

    inert: probability the pod never uses its GPU. active_mean / pause_mean: mean length (s) of
    active phases and of pauses at 0 % (exponential). level_median / level_sigma: the pod's
    level while active is lognormal (median, sigma of the log), at most 100 % and at most the
    pod's GPU share (`gpu_milli` / 10) for GPU-sharing pods.
    """

    inert: float
    active_mean: float
    pause_mean: float
    level_median: float
    level_sigma: float


@dataclass(frozen=True, kw_only=True)
class Assumptions:
    """Everything the generator adds to the trace. Defaults are the documented ones."""

    seed: int = 20230701
    mix: Mapping[str, Mapping[str, float]] = field(
        default_factory=lambda: {
            "ls-single": {"inference": 0.5, "notebook": 0.3, "training": 0.2},
            "be-single": {"batch": 0.6, "training": 0.4},
        }
    )
    """Workload type of a one-GPU pod by QoS class (`ls-single`: LS; `be-single`: BE). Pods
    with 2+ GPUs, and Burstable or Guaranteed pods, are training."""
    shapes: Mapping[str, Shape] = field(
        default_factory=lambda: {
            "training": Shape(
                inert=0.22, active_mean=3 * 3600, pause_mean=1800, level_median=20, level_sigma=1.4
            ),
            "inference": Shape(
                inert=0.16, active_mean=1800, pause_mean=1200, level_median=3, level_sigma=1.4
            ),
            "notebook": Shape(
                inert=0.42, active_mean=1200, pause_mean=3600, level_median=4, level_sigma=1.4
            ),
            "batch": Shape(
                inert=0.28, active_mean=3600, pause_mean=600, level_median=16, level_sigma=1.4
            ),
        }
    )
    failed_inert: float = 0.35
    """Added to `inert` for pods the trace records as Failed (they mostly never got going)."""
    long_run_seconds: int = 86400
    long_inert_factor: float = 0.4
    """Pods that ran at least `long_run_seconds` are inert with `long_inert_factor` times the
    probability: long jobs are idle less often (the Philly re-analysis: 25 % idle for jobs over
    24 h against 49 % under 6 h)."""
    high_priority_qos: tuple[str, ...] = ("Guaranteed",)
    """Training pods of these QoS classes use the type's second (higher) priority class."""
    checkpoint_seconds: Mapping[str, int] = field(default_factory=lambda: {"training": 1800})
    """Types that checkpoint, and how often (seconds of progress); others restart from zero."""
    fb_used_fraction: float = 0.6
    """GPU memory a pod holds while it lives, as a fraction of 40 GiB; constant (so the
    framebuffer never counts as activity in the idle decision)."""


CALIBRATION_TARGETS: dict[str, dict[str, Any]] = {
    "pod_mean_util_percent": {
        "target": 10.5,
        "source": "Alibaba PAI 2020 (pai_sensor_table, 3.0 M instances): mean of per-instance "
        "lifetime GPU utilisation 10.5 %",
    },
    "pod_median_util_percent": {
        "target": 1.5,
        "source": "same re-analysis: median 1.5 %",
    },
    "pods_at_zero": {
        "target": 0.345,
        "source": "same re-analysis: 34.5 % of instances average exactly 0 %",
    },
    "idle_share_of_reserved_gpu_time": {
        "target": [0.25, 0.49],
        "source": "Microsoft Philly 2017 re-analysis: 25 % (jobs > 24 h) to 49 % (jobs < 6 h) "
        "of reserved GPU-minutes fully idle",
    },
}

CITATIONS = (
    "Weng et al., MLaaS in the Wild: Workload Analysis and Scheduling in Large-Scale "
    "Heterogeneous GPU Clusters, NSDI 2022 (Alibaba PAI trace v2020).",
    "Affinode, Alibaba PAI GPU Cluster Trace v2020 case study: "
    "https://affinode.io/case-studies/alibaba-gpu-v2020/case-study.html",
    "Jeon et al., Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training "
    "Workloads, USENIX ATC 2019 (Microsoft Philly trace).",
    "Affinode, Philly Cluster Dataset case study: "
    "https://affinode.io/case-studies/msft-philly-dataset/analysis/case-study.html",
    "Weng et al., Beware of Fragmentation: Scheduling GPU-Sharing Workloads with "
    "Fragmentation Gradient Descent, USENIX ATC 2023 (the replayed trace).",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """A trace pod with everything the replay adds to it."""

    pod: TracePod
    index: int
    workload_type: str
    team: str
    high_priority: bool
    profile: Profile
    checkpoint_seconds: int | None
    fb_used_mib: float

    @property
    def gpus(self) -> int:
        return self.pod.gpus

    @property
    def work_seconds(self) -> float:
        return self.profile.duration


def workload_type(pod: TracePod, draw: float, assumptions: Assumptions) -> str:
    if pod.num_gpu >= 2 or pod.qos in ("Burstable", "Guaranteed"):
        return "training"
    mix = assumptions.mix["ls-single" if pod.qos == "LS" else "be-single"]
    return _pick(mix, draw)


def _pick(weights: Mapping[str, float], draw: float) -> str:
    total = sum(weights.values())
    at = 0.0
    for name, weight in weights.items():
        at += weight / total
        if draw < at:
            return name
    return next(reversed(list(weights)))


def profile_for(
    pod: TracePod, shape: Shape, rng: np.random.Generator, assumptions: Assumptions
) -> Profile:
    duration = float(pod.run_seconds)
    inert = shape.inert + (assumptions.failed_inert if pod.phase == "Failed" else 0.0)
    if duration >= assumptions.long_run_seconds:
        inert *= assumptions.long_inert_factor
    inert = min(0.95, inert)
    if rng.random() < inert:
        return Profile.constant(duration, 0.0)
    cap = pod.gpu_milli / 10.0 if pod.shared else 100.0
    level = float(
        min(cap, 100.0, shape.level_median * math.exp(shape.level_sigma * rng.standard_normal()))
    )
    level = max(round(level, 1), 0.1)
    # Enough phases to cover the run, drawn in bulk; the first phase is active.
    cycle = shape.active_mean + shape.pause_mean
    n = int(duration / cycle * 1.5) + 8
    segments: list[tuple[float, float]] = []
    at = 0.0
    while at < duration:
        actives = rng.exponential(shape.active_mean, n)
        pauses = rng.exponential(shape.pause_mean, n)
        for a, p in zip(actives.tolist(), pauses.tolist(), strict=True):
            for length, util in ((a, level), (p, 0.0)):
                length = min(length, duration - at)
                if length > 0:
                    segments.append((length, util))
                    at += length
            if at >= duration:
                break
    return Profile.of(segments)


def generate(
    pods: list[TracePod],
    team_shares: Mapping[str, Mapping[str, float]],
    assumptions: Assumptions | None = None,
) -> list[Workload]:
    """One workload per trace pod, reproducible for a given seed and trace."""
    assumptions = assumptions or Assumptions()
    root = np.random.SeedSequence(assumptions.seed)
    workloads: list[Workload] = []
    for index, (pod, seed) in enumerate(zip(pods, root.spawn(len(pods)), strict=True)):
        rng = np.random.default_rng(seed)
        kind = workload_type(pod, float(rng.random()), assumptions)
        team = _pick(team_shares[kind], float(rng.random()))
        profile = profile_for(pod, assumptions.shapes[kind], rng, assumptions)
        workloads.append(
            Workload(
                pod=pod,
                index=index,
                workload_type=kind,
                team=team,
                high_priority=kind == "training" and pod.qos in assumptions.high_priority_qos,
                profile=profile,
                checkpoint_seconds=assumptions.checkpoint_seconds.get(kind),
                fb_used_mib=round(40960 * assumptions.fb_used_fraction, 1),
            )
        )
    return workloads


def calibration(workloads: list[Workload]) -> dict[str, Any]:
    """What the generated fleet achieves against `CALIBRATION_TARGETS` (over every pod's
    traced run time, as the published figures are over instance lifetimes)."""
    means = []
    idle_gpu_seconds = 0.0
    gpu_seconds = 0.0
    for w in workloads:
        duration = w.profile.duration
        util, busy = w.profile.integral(0.0, duration)
        means.append(util / duration)
        idle_gpu_seconds += (duration - busy) * w.gpus
        gpu_seconds += duration * w.gpus
    array = np.array(means)
    by_type: dict[str, int] = {}
    for w in workloads:
        by_type[w.workload_type] = by_type.get(w.workload_type, 0) + 1
    return {
        "pod_mean_util_percent": round(float(array.mean()), 2),
        "pod_median_util_percent": round(float(np.median(array)), 2),
        "pods_at_zero": round(float((array == 0).mean()), 3),
        "idle_share_of_reserved_gpu_time": round(idle_gpu_seconds / gpu_seconds, 3),
        "pods_by_type": dict(sorted(by_type.items())),
        "cdf_percentiles": [round(float(v), 3) for v in np.percentile(array, range(101))],
    }


def describe(assumptions: Assumptions) -> dict[str, Any]:
    """The assumptions as plain data, for the report and the JSON figures."""
    return {
        "seed": assumptions.seed,
        "mix": {k: dict(v) for k, v in assumptions.mix.items()},
        "shapes": {
            name: {
                "inert": s.inert,
                "active_mean_seconds": s.active_mean,
                "pause_mean_seconds": s.pause_mean,
                "level_median_percent": s.level_median,
                "level_sigma": s.level_sigma,
            }
            for name, s in assumptions.shapes.items()
        },
        "failed_inert": assumptions.failed_inert,
        "long_run_seconds": assumptions.long_run_seconds,
        "long_inert_factor": assumptions.long_inert_factor,
        "high_priority_qos": list(assumptions.high_priority_qos),
        "checkpoint_seconds": dict(assumptions.checkpoint_seconds),
        "fb_used_fraction": assumptions.fb_used_fraction,
    }
