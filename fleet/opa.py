"""How every OPA of the project runs: the in-cluster Deployment the gate declares, the local
fleet's, the test server and the benchmark. Measured settings, so they are written once."""

from __future__ import annotations

OPA_GC_ENV = {"GOGC": "off", "GOMEMLIMIT": "768MiB"}
"""Go GC settings of OPA: collect by memory budget, not by heap growth. An admission decision
allocates 100-200 kB that is garbage as soon as it is answered, over a live heap of a few tens
of MB; with Go's default (GOGC=100) the collector ran every few hundred decisions and took about
a third of OPA's CPU. With GOGC=off the heap grows to GOMEMLIMIT (768 MiB, under the
container's 1 GiB, whose memory request is the same 1 GiB so the budget is reserved on the node)
and the collector runs only there, tracing just the live heap: admission throughput on 2 cores
went from 1,287 to 1,807 decisions/s (GOGC=400: 1,472; 1600: 1,686; bench/opa_admission.py,
machine idle). Go still collects as often as it must to stay under the limit, its collector
capped at half the CPU if the live heap itself ever approached it."""
OPA_RUN_FLAGS = ("--optimize-store-for-read-speed",)
"""`opa run` flags every OPA of the project gets (the in-cluster Deployment, the local stack, the
test server and the benchmark). The store keeps data as the AST values evaluation reads, so a
decision no longer converts `data.fleetplane.config` from raw JSON on every lookup: an admission
decision went from 1,507 to 1,350 allocations and the gate's throughput on 2 cores from 1,874 to
2,267-2,306 decisions/s (bench/opa_admission.py, machine idle). Data written over the REST API (the
controller's spend document) is converted once, on write."""
