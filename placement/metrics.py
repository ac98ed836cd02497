"""The service's own metrics, in Prometheus' text format at /metrics.

Volcano says nothing when an ignorable extender fails (a warning in its log, then its own
scores): these counters and Prometheus' `up` of the scrape are how a fleet sees that FGD is
not deciding (observability/rules.yaml alerts on both).
"""

from __future__ import annotations

import threading
from collections import defaultdict

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
"""Seconds; Volcano's call times out at 0.5 s (fleet.placement.HTTP_TIMEOUT)."""

REQUESTS = "fleetplane_placement_requests_total"
SECONDS = "fleetplane_placement_request_seconds"
NODES = "fleetplane_placement_nodes_scored_total"
LEARNED = "fleetplane_placement_learned_pods"
TYPICAL = "fleetplane_placement_typical_shapes"


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: dict[tuple[str, str], int] = defaultdict(int)
        self._buckets: dict[str, list[int]] = defaultdict(lambda: [0] * len(BUCKETS))
        self._sum: dict[str, float] = defaultdict(float)
        self._count: dict[str, int] = defaultdict(int)
        self._nodes = 0
        self.learned = 0
        self.typical = 0

    def observe(self, verb: str, outcome: str, seconds: float, nodes: int = 0) -> None:
        with self._lock:
            self._requests[(verb, outcome)] += 1
            counts = self._buckets[verb]
            for i, bound in enumerate(BUCKETS):
                if seconds <= bound:
                    counts[i] += 1
            self._sum[verb] += seconds
            self._count[verb] += 1
            self._nodes += nodes

    def text(self) -> str:
        with self._lock:
            lines = [
                f"# HELP {REQUESTS} Extender calls answered, by verb and outcome (ok, error).",
                f"# TYPE {REQUESTS} counter",
            ]
            for (verb, outcome), n in sorted(self._requests.items()):
                lines.append(f'{REQUESTS}{{verb="{verb}",outcome="{outcome}"}} {n}')
            lines += [
                f"# HELP {SECONDS} Time to answer an extender call (reading, scoring, writing).",
                f"# TYPE {SECONDS} histogram",
            ]
            for verb, counts in sorted(self._buckets.items()):
                for bound, n in zip(BUCKETS, counts, strict=True):
                    lines.append(f'{SECONDS}_bucket{{verb="{verb}",le="{bound}"}} {n}')
                lines.append(f'{SECONDS}_bucket{{verb="{verb}",le="+Inf"}} {self._count[verb]}')
                lines.append(f'{SECONDS}_sum{{verb="{verb}"}} {self._sum[verb]}')
                lines.append(f'{SECONDS}_count{{verb="{verb}"}} {self._count[verb]}')
            lines += [
                f"# HELP {NODES} Candidate nodes scored.",
                f"# TYPE {NODES} counter",
                f"{NODES} {self._nodes}",
                f"# HELP {LEARNED} Recent pods in the learned workload distribution.",
                f"# TYPE {LEARNED} gauge",
                f"{LEARNED} {self.learned}",
                f"# HELP {TYPICAL} Typical pod shapes FGD takes its expectation over.",
                f"# TYPE {TYPICAL} gauge",
                f"{TYPICAL} {self.typical}",
            ]
            return "\n".join(lines) + "\n"
