"""The workload distribution FGD takes its expectation over: the trace's pod shapes to start
with, moved towards the shapes of the pods the cluster has been asked to place recently.

Each task Volcano asks the service about is one observation (once per task, however many
sessions it waits through). The distribution is the seed's frequencies weighted as `prior`
pods plus the last `window` tasks' shapes; `window` 0 keeps the seed alone (the check against
the replay's model runs so, as the model's distribution is the pod list's).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict, deque
from importlib import resources
from pathlib import Path

from placement.fgd import Shape, TypicalPods, typical_pods

SEED_FILE = "seed_workload.json"
"""Shipped beside this module: the shapes of the trace's default pod list, with counts."""
RECENT_PODS = 2000
"""Tasks remembered: a day or two of a busy fleet's arrivals."""
PRIOR_PODS = 2000
"""The seed weighs as this many pods, so that a young cluster's few pods do not swing it."""


def read_seed(path: Path | None = None) -> list[tuple[Shape, float]]:
    """(shape, pods) pairs of a seed file ({"shapes": [{cpu_milli, gpu_milli, num_gpu,
    gpu_spec, pods}]}); the shipped one without `path`."""
    if path is None:
        text = resources.files("placement").joinpath(SEED_FILE).read_text()
    else:
        text = path.read_text()
    rows = json.loads(text)["shapes"]
    return [
        (
            Shape(
                cpu_milli=int(r["cpu_milli"]),
                gpu_milli=int(r["gpu_milli"]) if int(r["num_gpu"]) else 0,
                num_gpu=int(r["num_gpu"]),
                gpu_spec=tuple(sorted(r.get("gpu_spec") or ())),
            ),
            float(r["pods"]),
        )
        for r in rows
    ]


class Workload:
    """The learned distribution; thread-safe (the server answers calls concurrently)."""

    def __init__(
        self,
        seed: list[tuple[Shape, float]],
        *,
        window: int = RECENT_PODS,
        prior: float = PRIOR_PODS,
    ) -> None:
        if not seed:
            raise ValueError("the seed workload has no shapes")
        total = sum(c for _, c in seed)
        self._raw = list(seed)
        self._seed = [(s, c / total) for s, c in seed]
        self._prior = prior
        self._recent: deque[Shape] = deque(maxlen=window) if window > 0 else deque(maxlen=0)
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._window = window
        self._lock = threading.Lock()
        self._typical: TypicalPods | None = None

    @property
    def learned(self) -> int:
        """Tasks in the window now."""
        return len(self._recent)

    def observe(self, uid: str, shape: Shape) -> None:
        """Count a task once (a pending task is asked about in every session)."""
        if self._window <= 0:
            return
        with self._lock:
            if uid in self._seen:
                return
            self._seen[uid] = None
            if len(self._seen) > 4 * self._window:
                self._seen.popitem(last=False)
            self._recent.append(shape)
            self._typical = None

    def typical(self) -> TypicalPods:
        with self._lock:
            if self._typical is None and not self._recent:
                # The seed alone, in its own counts (exactly the replay's typical pods).
                self._typical = typical_pods(self._raw)
            if self._typical is None:
                weighted: dict[Shape, float] = {}
                for shape, share in self._seed:
                    weighted[shape] = weighted.get(shape, 0.0) + share * self._prior
                for shape in self._recent:
                    weighted[shape] = weighted.get(shape, 0.0) + 1.0
                self._typical = typical_pods(weighted.items())
            return self._typical
