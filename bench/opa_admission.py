"""Admission decisions per second and latency through a real OPA server over HTTP.

    python bench/opa_admission.py [--seconds 10] [--threads 4] [--opa tools/bin/opa]

Starts `opa run --server` on loopback with the project's policies (tests excluded) and the
fixture configuration, then replays realistic AdmissionReviews with a few client threads, each
on one keep-alive connection, POSTing to `/` the way the API server's webhook client does: the
review corpus (tests/policies/fixtures/reviews/: every rule, allowed and denied, for Pods,
Deployments, StatefulSets, Jobs, CronJobs and Volcano Jobs) and requests generated from the
Alibaba GPU trace by tools.policydiff (production-shaped pods, mostly allowed; `--trace none`
to skip). Prints decisions per second and latency percentiles measured by the client (request
written to response read). Figures only: nothing here asserts timing.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.policydiff import DEFAULT_TRACE, generate_from_trace  # noqa: E402

DEFAULT_OPA = ROOT / "tools" / "bin" / "opa"
DEFAULT_POLICIES = ROOT / "policies"
DEFAULT_CONFIG = ROOT / "tests" / "policies" / "fixtures" / "config.json"
DEFAULT_CORPUS = ROOT / "tests" / "policies" / "fixtures" / "reviews"
TARGET_P99_MS = 2.0
TARGET_RATE = 2000.0


@dataclass
class Worker:
    """One client thread on one keep-alive connection."""

    port: int
    bodies: list[bytes]
    offset: int
    latencies_ns: list[int] = field(default_factory=list)
    errors: int = 0

    def run(self, start: threading.Event, stop_at: list[float]) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        connection.connect()
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        headers = {"Content-Type": "application/json", "Connection": "keep-alive"}
        i = self.offset
        count = len(self.bodies)
        start.wait()
        while time.perf_counter() < stop_at[0]:
            body = self.bodies[i % count]
            i += 1
            began = time.perf_counter_ns()
            try:
                connection.request("POST", "/", body=body, headers=headers)
                response = connection.getresponse()
                payload = response.read()
            except (OSError, http.client.HTTPException):
                self.errors += 1
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                continue
            self.latencies_ns.append(time.perf_counter_ns() - began)
            if response.status != 200 or b'"allowed"' not in payload:
                self.errors += 1
        connection.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_opa(
    opa: Path,
    policies: Path,
    config: Path,
    port: int,
    log: Path,
    extra: list[str],
    gogc: int | None,
) -> subprocess.Popen[bytes]:
    data_dir = Path(tempfile.mkdtemp(prefix="fleetplane-bench-"))
    # OPA loads a data file at the path of its directories: fleetplane/config/data.json.
    target = data_dir / "fleetplane" / "config"
    target.mkdir(parents=True)
    (target / "data.json").write_text(config.read_text())
    command = [
        str(opa),
        "run",
        "--server",
        f"--addr=127.0.0.1:{port}",
        "--log-level=error",
        "--disable-telemetry",
        "--ignore=*_test.rego",
        "--ignore=.*",
        *extra,
        str(policies),
        str(data_dir),
    ]
    env = dict(os.environ)
    if gogc is not None:
        env["GOGC"] = str(gogc)
    process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"opa exited with {process.returncode}:\n{log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                pass
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/health")
            if connection.getresponse().status == 200:
                return process
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit("opa did not become healthy within 30 s")


def load_corpus(corpus: Path, config: Path, trace: str, trace_limit: int) -> list[bytes]:
    reviews = [json.loads(path.read_bytes()) for path in sorted(corpus.glob("*.json"))]
    if trace != "none" and Path(trace).exists():
        generated = generate_from_trace(
            Path(trace), json.loads(config.read_text()), seed=2023, limit=trace_limit
        )
        reviews += [request.review for request in generated]
    if not reviews:
        raise SystemExit(f"no AdmissionReview files in {corpus}")
    return [json.dumps(review, separators=(",", ":")).encode() for review in reviews]


def server_eval_ns(port: int, bodies: list[bytes], samples: int) -> list[int]:
    """OPA's own evaluation time per decision (timer_rego_query_eval_ns), one request at a time
    on /v1/data/system/main?metrics=true: the policy's cost without HTTP, queueing or client."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    timings: list[int] = []
    for i in range(samples):
        body = b'{"input":' + bodies[i % len(bodies)] + b"}"
        connection.request(
            "POST",
            "/v1/data/system/main?metrics=true",
            body=body,
            headers={"Content-Type": "application/json"},
        )
        answer = json.loads(connection.getresponse().read())
        timings.append(int(answer["metrics"]["timer_rego_query_eval_ns"]))
    connection.close()
    return timings


def percentile(sorted_values: list[int], fraction: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values)) - 1))
    return sorted_values[index] / 1e6


def run(args: argparse.Namespace) -> dict[str, Any]:
    bodies = load_corpus(args.corpus, args.config, args.trace, args.trace_limit)
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="fleetplane-bench-log-") as log_dir:
        process = start_opa(
            args.opa,
            args.policies,
            args.config,
            port,
            Path(log_dir) / "opa.log",
            args.opa_arg or [],
            args.gogc,
        )
        try:
            workers = [
                Worker(port, bodies, offset=i * len(bodies) // args.threads)
                for i in range(args.threads)
            ]
            for phase, seconds in (("warmup", args.warmup), ("measure", args.seconds)):
                for worker in workers:
                    worker.latencies_ns.clear()
                    worker.errors = 0
                start = threading.Event()
                stop_at = [0.0]
                threads = [
                    threading.Thread(target=w.run, args=(start, stop_at), daemon=True)
                    for w in workers
                ]
                for thread in threads:
                    thread.start()
                began = time.perf_counter()
                stop_at[0] = began + seconds
                start.set()
                for thread in threads:
                    thread.join()
                elapsed = time.perf_counter() - began
                if phase == "measure":
                    latencies = sorted(ns for w in workers for ns in w.latencies_ns)
                    errors = sum(w.errors for w in workers)
            evaluation = sorted(server_eval_ns(port, bodies, args.eval_samples))
        finally:
            process.terminate()
            process.wait(timeout=10)
    return {
        "requests": len(latencies),
        "errors": errors,
        "seconds": elapsed,
        "rate": len(latencies) / elapsed,
        "p50_ms": percentile(latencies, 0.50),
        "p90_ms": percentile(latencies, 0.90),
        "p99_ms": percentile(latencies, 0.99),
        "max_ms": latencies[-1] / 1e6,
        "mean_ms": statistics.fmean(latencies) / 1e6,
        "corpus": len(bodies),
        "eval_p50_ms": percentile(evaluation, 0.50),
        "eval_p99_ms": percentile(evaluation, 0.99),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python bench/opa_admission.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="measured time (default 10)")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured time (default 2)")
    parser.add_argument("--threads", type=int, default=4, help="client threads (default 4)")
    parser.add_argument("--opa", type=Path, default=DEFAULT_OPA)
    parser.add_argument("--policies", type=Path, default=DEFAULT_POLICIES)
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--trace", default=str(DEFAULT_TRACE), help="trace CSV, or `none`")
    parser.add_argument(
        "--trace-limit", type=int, default=1000, help="trace pods to replay (default 1000)"
    )
    parser.add_argument(
        "--opa-arg",
        action="append",
        help="extra `opa run` flag, e.g. --opa-arg=--optimize-store-for-read-speed (repeatable)",
    )
    parser.add_argument("--gogc", type=int, help="GOGC for the OPA process (default: Go's 100)")
    parser.add_argument(
        "--eval-samples", type=int, default=1000, help="requests for the evaluation timer"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if not args.opa.exists():
        print(f"{args.opa} is missing; run `make tools`", file=sys.stderr)
        return 2
    figures = run(args)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    cores = os.cpu_count()
    print(
        f"OPA admission over HTTP (loopback, keep-alive, {args.threads} client threads, "
        f"{cores} cores, {figures['corpus']} distinct reviews)"
    )
    print(
        f"  decisions    {figures['requests']} in {figures['seconds']:.1f} s, {figures['errors']} errors"
    )
    print(f"  throughput   {figures['rate']:.0f} decisions/s   (target >= {TARGET_RATE:.0f})")
    print(
        f"  latency      p50 {figures['p50_ms']:.3f} ms   p90 {figures['p90_ms']:.3f} ms   "
        f"p99 {figures['p99_ms']:.3f} ms   (target p99 <= {TARGET_P99_MS} ms)   "
        f"max {figures['max_ms']:.3f} ms"
    )
    print(
        f"  evaluation   p50 {figures['eval_p50_ms']:.3f} ms   p99 {figures['eval_p99_ms']:.3f} ms"
        "   (OPA's own timer, one request at a time)"
    )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"  machine      load average {load} (other work on the machine skews the figures)")
    met = figures["rate"] >= TARGET_RATE and figures["p99_ms"] <= TARGET_P99_MS
    print(f"  targets      {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
