"""The CPU kept for idle GPUs, in the time-driven replay: the default trace's scenarios with
every pod (CPU-only ones too) under three placements of pods without GPUs, and what each does
to the CPU-only pods' waits, the GPU pods' waits and the bill.

    python bench/replay_cpu_reservation.py [--scenario NAME ...] [--pods FILE]

- `none`: the shipped Volcano configuration (no reservation);
- `volcano-12`: `volcano: {reserve_cpu_per_idle_gpu: 12}`, one ratio for every node;
- `per-shape`: each pool's own (`fleet.fragmentation.reserved_cpu_per_idle_gpu`).

Figures only: nothing here asserts them (docs/replay.md, "CPU-only pods", has them).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace

from localfleet.servers import OpaServer
from replay.cpu_pods import ReservePerIdleGpu, per_shape, single_ratio
from replay.node_pools import node_shapes
from replay.opa import BatchClient
from replay.results import CPU_ONLY, scenario_figures
from replay.runner import measurement_window, run_scenario, trace_variables
from replay.scenarios import load_scenarios
from replay.settings import Settings
from replay.trace import DEFAULT_POD_FILE, DEFAULT_TRACE_DIR, load_trace
from replay.workloads import generate

PLACEMENTS: dict[str, ReservePerIdleGpu | None] = {
    "none": single_ratio(None),
    "volcano-12": single_ratio(12),
    "per-shape": per_shape,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", action="append", default=[])
    parser.add_argument("--pods", default=DEFAULT_POD_FILE)
    parser.add_argument("--placement", action="append", default=[])
    args = parser.parse_args()
    trace = load_trace(DEFAULT_TRACE_DIR, pod_file=args.pods)
    variables = trace_variables(trace)
    scenario_set = load_scenarios(
        variables=variables,
        only=tuple(args.scenario or ["fixed", "autoscaled"]),
        shapes=node_shapes(trace.nodes),
    )
    workloads = generate(trace.pods, scenario_set.assignment)
    settings = replace(Settings(), window=measurement_window(trace, "auto"))
    print(
        f"{args.pods}: {len(trace.pods):,} GPU pods, {len(trace.cpu_pods):,} CPU-only pods",
        flush=True,
    )
    print(
        "| scenario | placement | CPU-only wait p50 / p95 / p99 / max s (never) | GPU wait p95 / p99 s | bill $ | allocated | CPU-s |"
    )
    print("|---|---|---|---|---|---|---|")
    for scenario in scenario_set.scenarios:
        for name in args.placement or list(PLACEMENTS):
            server = OpaServer().start()
            client = BatchClient(server.url)
            began = time.process_time()
            try:
                replay = run_scenario(
                    scenario,
                    workloads,
                    client,
                    settings,
                    cpu_pods=trace.cpu_pods,
                    reserve=PLACEMENTS[name],
                )
            finally:
                client.close()
                server.stop()
            f = scenario_figures(replay)
            c, g = f["queue_wait_seconds"][CPU_ONLY], f["queue_wait_seconds"]["all"]
            print(
                f"| {scenario.name} | {name} | {c['p50']:.0f} / {c['p95']:.0f} / {c['p99']:.0f} / "
                f"{c['max']:.0f} ({c['never_started']}) | {g['p95']:.0f} / {g['p99']:.0f} | "
                f"{f['cost_usd']['total']:,.0f} | {f['ratios']['allocation']:.3f} | "
                f"{time.process_time() - began:.1f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
