"""Pack mode's figures and speed: every placement policy over the whole GPU node list, on
each published pod list (or those named), several draws each; prints the table of GPUs left
unallocated next to the paper's and the seconds per draw (the speed target: one policy's
draw within 60 s on two free cores).

    python bench/replay_pack.py [--repeats N] [--out DIR] [POD_LIST ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from replay.pack import experiment, report
from replay.trace import DEFAULT_NODE_FILE, PACKAGED_TRACE_DIR, read_nodes, read_pod_requests

LISTS = (
    "openb_pod_list_default.csv",
    "openb_pod_list_gpushare40.csv",
    "openb_pod_list_multigpu30.csv",
    "openb_pod_list_gpuspec33.csv",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lists", nargs="*", default=list(LISTS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--policy", action="append", default=[])
    parser.add_argument("--jobs", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    nodes = read_nodes(PACKAGED_TRACE_DIR / DEFAULT_NODE_FILE)
    policies = args.policy or experiment.known_policies()
    print(
        f"{len(nodes):,} nodes, {sum(n.gpus for n in nodes):,} GPUs; {os.cpu_count()} CPUs; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    for name in args.lists:
        pods = read_pod_requests(PACKAGED_TRACE_DIR / name)
        began = time.perf_counter()
        result = experiment.run(
            pods, nodes, policies, range(42, 42 + args.repeats), trace=name, jobs=args.jobs
        )
        document = report.summary(result)
        print(
            f"\n## {name}: {time.perf_counter() - began:.0f} s wall, load "
            f"{os.getloadavg()[0]:.1f}\n"
        )
        print(report.table(document))
        print()
        for policy, f in document["policies"].items():
            print(
                f"  {policy}: {f['seconds_per_draw']:.1f} s wall, "
                f"{f['cpu_seconds_per_draw']:.1f} CPU-s per draw, {f['pods']:,} pods, "
                f"{f['failed']:,.0f} did not fit"
            )
        if args.out:
            report.write(args.out / Path(name).stem, document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
