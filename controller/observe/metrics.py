"""DCGM evidence of GPU activity, read through the Prometheus HTTP API.

Evidence is read in two steps per idle window, as instant queries at `now` aggregated per GPU
(`namespace`, `pod`, `Hostname`, `gpu`, the labels dcgm-exporter joins to pods):

1. the fleet: `max_over_time(DCGM_FI_DEV_GPU_UTIL[window])` for every GPU series. A pod whose
   utilisation went above the idle line is busy whatever else the evidence says, and that is
   what most of a healthy fleet is;
2. the rest, only the pods with a GPU series at or under the highest idle threshold that uses
   the window (`detail`):

       count_over_time                   DCGM_FI_DEV_GPU_UTIL           (coverage)
       max_over_time                     DCGM_FI_PROF_GR_ENGINE_ACTIVE  (ratio 0..1, when exported)
       count / max / min_over_time       DCGM_FI_DEV_FB_USED            (MiB)

   selected by their `namespace` and `pod` labels (set matchers, which Prometheus answers from
   its index), or fleet-wide when more than `DETAIL_FLEET_WIDE_ABOVE` pods need them.

Before, all six aggregations ran over every GPU: at 40,000 GPUs about 3.6 CPU seconds in
Prometheus and 1.8 here, for answers about pods that were plainly busy (measured with
`bench/controller_pass.py`). Evidence of a pod that only step 1 covered is marked
`PodEvidence.detailed = False`: it can prove the pod busy, never idle (`decide.idle`). The
queries of step 2 run concurrently. Which signals decide idleness, and why, is written down in
controller/README.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import requests

from controller.errors import PermanentError, TemporaryError
from controller.views import view

UTIL = "DCGM_FI_DEV_GPU_UTIL"
ENGINE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
FB_USED = "DCGM_FI_DEV_FB_USED"
GROUP = "namespace, pod, Hostname, gpu"
# Above this many pods, step 2 queries the whole fleet instead of naming the pods: a set matcher
# of a few thousand names is still an index lookup, but a request body of that size is not.
DETAIL_FLEET_WIDE_ABOVE = 2000
DETAIL_BATCH = 500


@view
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


@view
class PodEvidence:
    """Every GPU series found for a pod over one window, keyed by (Hostname, gpu).

    `detailed` is False when only the peak utilisation was read (step 1 of the module doc): the
    sample counts and the other signals are then unknown (zero and None), which proves a pod
    busy when its utilisation went above the line, and nothing else."""

    window_seconds: int
    gpus: dict[tuple[str, str], GpuSeries]
    detailed: bool = True


PodKey = tuple[str, str]
GpuKey = tuple[str, str, str, str]


def label_set(values: Iterable[str]) -> str:
    """A PromQL regex matching exactly these label values (`a|b`, dots and other regex
    metacharacters escaped), as the body of a double-quoted PromQL string."""
    escaped = []
    for value in sorted(set(values)):
        plain = "".join("\\" + ch if ch in r"\.+*?()|[]{}^$" else ch for ch in value)
        escaped.append(plain.replace("\\", "\\\\").replace('"', '\\"'))
    return "|".join(escaped)


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
        where = self._where(promql)
        try:
            body = orjson.loads(response.content)
        except orjson.JSONDecodeError as error:
            raise PermanentError(f"{where}: answer is not JSON: {error}") from error
        if not isinstance(body, dict):
            raise PermanentError(f"{where}: answer is not a JSON object")
        if body.get("status") != "success":
            raise PermanentError(f"{where}: failed: {body.get('error')}")
        data = body.get("data")
        result = data.get("result") if isinstance(data, dict) else None
        if not isinstance(result, list):
            raise PermanentError(f"{where}: answer has no data.result list")
        return result

    def _per_gpu(self, promql: str, at: float) -> dict[GpuKey, float]:
        """One value per GPU series. A malformed series fails the whole answer (PermanentError):
        dropping it could leave a pod with partial evidence, and evidence must be whole."""
        values: dict[GpuKey, float] = {}
        for series in self.query(promql, at):
            labels = series.get("metric") if isinstance(series, dict) else None
            sample = series.get("value") if isinstance(series, dict) else None
            try:
                if labels is not None and not isinstance(labels, dict):
                    raise TypeError("metric is not an object")
                labels = labels or {}
                key = (
                    str(labels.get("namespace", "")),
                    str(labels.get("pod", "")),
                    str(labels.get("Hostname", "")),
                    str(labels.get("gpu", "")),
                )
                if not isinstance(sample, list) or len(sample) != 2:
                    raise TypeError('value is not a [time, "number"] pair')
                if not isinstance(sample[1], str):
                    raise TypeError("the sample value is not a string")
                values[key] = float(sample[1])
            except (TypeError, ValueError) as error:
                raise PermanentError(
                    f"{self._where(promql)}: malformed series {str(series)[:200]}: {error}"
                ) from error
        return values

    def _where(self, promql: str) -> str:
        """The server and query, as errors about its answer name them."""
        return f"prometheus {self.url}: query {promql[:300]!r}"

    def peaks(self, window_seconds: int, at: float) -> dict[GpuKey, float]:
        """Step 1: every GPU series' peak utilisation (percent) during [at - window, at]."""
        return self._per_gpu(
            f'max by ({GROUP}) (max_over_time({UTIL}{{pod!=""}}[{int(window_seconds)}s]))', at
        )

    def detail(
        self, window_seconds: int, at: float, pods: Iterable[PodKey] | None
    ) -> list[dict[GpuKey, float]]:
        """Step 2: utilisation sample counts, engine peak, framebuffer count/max/min per GPU of
        `pods` (None: every pod), in that order."""
        window = f"[{int(window_seconds)}s]"
        if pods is None:
            selectors = ['{pod!=""}']
        else:
            by_batch: list[list[PodKey]] = []
            chosen = sorted(set(pods))
            for start in range(0, len(chosen), DETAIL_BATCH):
                by_batch.append(chosen[start : start + DETAIL_BATCH])
            selectors = [
                f'{{namespace=~"{label_set(ns for ns, _ in batch)}",'
                f'pod=~"{label_set(name for _, name in batch)}"}}'
                for batch in by_batch
            ]
        functions = [
            ("count_over_time", UTIL),
            ("max_over_time", ENGINE),
            ("count_over_time", FB_USED),
            ("max_over_time", FB_USED),
            ("min_over_time", FB_USED),
        ]
        queries = [
            f"max by ({GROUP}) ({function}({metric}{selector}{window}))"
            for function, metric in functions
            for selector in selectors
        ]
        if not queries:
            return [{} for _ in functions]
        with ThreadPoolExecutor(max_workers=min(len(queries), 5)) as pool:
            answers = list(pool.map(lambda promql: self._per_gpu(promql, at), queries))
        merged: list[dict[GpuKey, float]] = []
        per = len(selectors)
        for index in range(len(functions)):
            combined: dict[GpuKey, float] = {}
            for answer in answers[index * per : (index + 1) * per]:
                combined.update(answer)
            merged.append(combined)
        return merged

    def evidence(
        self, window_seconds: int, at: float, idle_line_percent: float = 100.0
    ) -> dict[PodKey, PodEvidence]:
        """Per pod, the GPU series seen during [at - window, at]: detailed for every pod with a
        GPU at or under `idle_line_percent` (the highest idle threshold of the types using the
        window), peak utilisation only for the others."""
        peak = self.peaks(window_seconds, at)
        candidates = {(key[0], key[1]) for key, value in peak.items() if value <= idle_line_percent}
        details: list[dict[GpuKey, float]] = [{}, {}, {}, {}, {}]
        if candidates:
            restrict = None if len(candidates) > DETAIL_FLEET_WIDE_ABOVE else candidates
            details = self.detail(window_seconds, at, restrict)
        return self._assemble(window_seconds, peak, candidates, *details)

    @staticmethod
    def _assemble(
        window_seconds: int,
        peak: dict[GpuKey, float],
        candidates: set[PodKey],
        util_count: dict[GpuKey, float],
        engine_max: dict[GpuKey, float],
        fb_count: dict[GpuKey, float],
        fb_max: dict[GpuKey, float],
        fb_min: dict[GpuKey, float],
    ) -> dict[PodKey, PodEvidence]:
        gpus: dict[PodKey, dict[tuple[str, str], GpuSeries]] = {}
        keys = set(peak) | {k for k in set(util_count) | set(fb_count) if k[:2] in candidates}
        for key in keys:
            namespace, pod, hostname, gpu = key
            if (namespace, pod) in candidates:
                series = GpuSeries(
                    hostname=hostname,
                    gpu=gpu,
                    util_samples=int(util_count.get(key, 0)),
                    max_util_percent=peak.get(key, 0.0),
                    max_engine_active=engine_max.get(key),
                    fb_samples=int(fb_count.get(key, 0)),
                    max_fb_used_mib=fb_max.get(key),
                    min_fb_used_mib=fb_min.get(key),
                )
            else:
                series = GpuSeries(
                    hostname=hostname,
                    gpu=gpu,
                    util_samples=0,
                    max_util_percent=peak[key],
                    max_engine_active=None,
                    fb_samples=0,
                    max_fb_used_mib=None,
                    min_fb_used_mib=None,
                )
            gpus.setdefault((namespace, pod), {})[(hostname, gpu)] = series
        return {
            key: PodEvidence(window_seconds=window_seconds, gpus=series, detailed=key in candidates)
            for key, series in gpus.items()
        }

    def evidence_for_windows(
        self, windows: Mapping[int, float], at: float
    ) -> dict[int, dict[PodKey, PodEvidence]]:
        """Evidence per window; `windows` maps each window to its idle line (the highest idle
        threshold of the types using it)."""
        return {window: self.evidence(window, at, windows[window]) for window in sorted(windows)}
