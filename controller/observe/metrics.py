"""DCGM evidence of GPU activity, read through the Prometheus HTTP API.

For each idle window in use the pass makes six instant queries at `now`, each aggregated
per GPU (`namespace`, `pod`, `Hostname`, `gpu`, the labels dcgm-exporter joins to pods):

    count_over_time / max_over_time   DCGM_FI_DEV_GPU_UTIL           (percent, 0..100)
    max_over_time                     DCGM_FI_PROF_GR_ENGINE_ACTIVE  (ratio 0..1, when exported)
    count / max / min_over_time       DCGM_FI_DEV_FB_USED            (MiB)

The six queries run concurrently. The counts say whether the evidence covers the whole window (see `decide.idle`); which signals
decide idleness, and why, is written down in controller/README.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import orjson
import requests

from controller.errors import PermanentError, TemporaryError

UTIL = "DCGM_FI_DEV_GPU_UTIL"
ENGINE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
FB_USED = "DCGM_FI_DEV_FB_USED"
GROUP = "namespace, pod, Hostname, gpu"


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSeries:
    """What one GPU of one pod showed over the window."""

    hostname: str
    gpu: str
    util_samples: int
    max_util_percent: float
    max_engine_active: float | None
    fb_samples: int
    max_fb_used_mib: float | None
    min_fb_used_mib: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PodEvidence:
    """Every GPU series found for a pod over one window, keyed by (Hostname, gpu)."""

    window_seconds: int
    gpus: dict[tuple[str, str], GpuSeries]


PodKey = tuple[str, str]


class Prometheus:
    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._session = requests.Session()
        self._session.mount("http://", requests.adapters.HTTPAdapter(pool_maxsize=8))
        self._session.mount("https://", requests.adapters.HTTPAdapter(pool_maxsize=8))
        # Answers are several MiB at fleet scale; compressing them cost Prometheus 15-20 % more
        # CPU (16,000 GPUs, measured) for a transfer that stays in the cluster.
        self._session.headers["Accept-Encoding"] = "identity"
        self.requests_made = 0

    def close(self) -> None:
        self._session.close()

    def query(self, promql: str, at: float) -> list[dict[str, Any]]:
        """An instant query's result vector; TemporaryError when Prometheus is unreachable or
        overloaded, PermanentError when it rejects the query."""
        self.requests_made += 1
        try:
            response = self._session.post(
                f"{self.url}/api/v1/query",
                data={"query": promql, "time": f"{at:.3f}"},
                timeout=self.timeout,
            )
        except requests.RequestException as error:
            raise TemporaryError(f"prometheus {self.url}: {error}") from error
        if response.status_code >= 500 or response.status_code == 429:
            raise TemporaryError(f"prometheus {self.url}: HTTP {response.status_code}")
        try:
            body = orjson.loads(response.content)
        except orjson.JSONDecodeError as error:
            raise PermanentError(f"prometheus {self.url}: not JSON") from error
        if body.get("status") != "success":
            raise PermanentError(f"prometheus query {promql!r} failed: {body.get('error')}")
        return list(body["data"]["result"])

    def _per_gpu(self, promql: str, at: float) -> dict[tuple[str, str, str, str], float]:
        values: dict[tuple[str, str, str, str], float] = {}
        for series in self.query(promql, at):
            labels = series.get("metric") or {}
            key = (
                labels.get("namespace", ""),
                labels.get("pod", ""),
                labels.get("Hostname", ""),
                labels.get("gpu", ""),
            )
            values[key] = float(series["value"][1])
        return values

    def evidence(self, window_seconds: int, at: float) -> dict[PodKey, PodEvidence]:
        """Per pod, the GPU series seen during [at - window, at]."""
        window = f"[{int(window_seconds)}s]"

        def q(function: str, metric: str) -> str:
            return f'max by ({GROUP}) ({function}({metric}{{pod!=""}}{window}))'

        queries = [
            q("count_over_time", UTIL),
            q("max_over_time", UTIL),
            q("max_over_time", ENGINE),
            q("count_over_time", FB_USED),
            q("max_over_time", FB_USED),
            q("min_over_time", FB_USED),
        ]
        with ThreadPoolExecutor(max_workers=len(queries)) as pool:
            answers = list(pool.map(lambda promql: self._per_gpu(promql, at), queries))
        util_count, util_max, engine_max, fb_count, fb_max, fb_min = answers
        found: dict[PodKey, dict[tuple[str, str], GpuSeries]] = {}
        for key in set(util_count) | set(fb_count):
            namespace, pod, hostname, gpu = key
            found.setdefault((namespace, pod), {})[(hostname, gpu)] = GpuSeries(
                hostname=hostname,
                gpu=gpu,
                util_samples=int(util_count.get(key, 0)),
                max_util_percent=util_max.get(key, 0.0),
                max_engine_active=engine_max.get(key),
                fb_samples=int(fb_count.get(key, 0)),
                max_fb_used_mib=fb_max.get(key),
                min_fb_used_mib=fb_min.get(key),
            )
        return {
            key: PodEvidence(window_seconds=window_seconds, gpus=gpus)
            for key, gpus in found.items()
        }

    def evidence_for_windows(
        self, windows: Iterable[int], at: float
    ) -> dict[int, dict[PodKey, PodEvidence]]:
        return {window: self.evidence(window, at) for window in sorted(set(windows))}
