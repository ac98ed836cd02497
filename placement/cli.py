"""`python -m placement [--host H] [--port P] [--seed FILE] [--recent-pods N] [--prior-pods N]`:
serve Volcano's extender calls until stopped (SIGTERM or Ctrl-C)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path
from types import FrameType

from fleet.placement import PORT
from placement.service import PlacementServer, Scorer
from placement.workload import PRIOR_PODS, RECENT_PODS, Workload, read_seed


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m placement",
        description="Score Volcano's candidate nodes by the fragmentation gradient (FGD).",
    )
    p.add_argument("--host", default="0.0.0.0", help="address to listen on (default all)")
    p.add_argument("--port", type=int, default=PORT, help=f"port (default {PORT})")
    p.add_argument(
        "--seed",
        type=Path,
        default=None,
        help="pod shapes to start from (JSON as placement/seed_workload.json; default the "
        "trace's default pod list)",
    )
    p.add_argument(
        "--recent-pods",
        type=int,
        default=RECENT_PODS,
        help=f"tasks of the cluster's own to learn from (default {RECENT_PODS}; 0: the seed only)",
    )
    p.add_argument(
        "--prior-pods",
        type=float,
        default=PRIOR_PODS,
        help=f"how many pods the seed weighs as (default {PRIOR_PODS})",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        workload = Workload(read_seed(args.seed), window=args.recent_pods, prior=args.prior_pods)
        workload.typical()
    except (OSError, ValueError, KeyError) as error:
        print(f"placement: cannot read the seed workload: {error}", file=sys.stderr)
        return 2
    server = PlacementServer((args.host, args.port), Scorer(workload))

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    logging.getLogger("placement").info("serving on %s:%d", args.host, server.server_address[1])
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
