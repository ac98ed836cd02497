"""How every OPA of the project runs: the in-cluster Deployment the gate declares, the local
fleet's, the test server and the benchmark. Measured settings, so they are written once."""

from __future__ import annotations

OPA_MEMORY_MIB = 1024
"""OPA's memory per replica unless the config says otherwise (`opa.memory_mib`): the container's
request and limit, three quarters of it the Go GC's budget (`opa_gc_env`)."""


def opa_gc_env(memory_mib: int = OPA_MEMORY_MIB) -> dict[str, str]:
    """`OPA_GC_ENV` for an OPA given `memory_mib`: GOMEMLIMIT at three quarters of it, the rest
    left for what Go does not count (stacks, the runtime) under the container's limit.

    A large fleet's documents are live heap the collector traces: with the documents the
    controller keeps for 100,000 pods loaded, the gate at 500 decisions/s answered p99 47-164 ms
    under 768 MiB (the collector ran again and again near the limit) and 8.8-12 ms under
    1,536 MiB, as an empty fleet's 9.9-32 ms (bench/opa_admission.py --fleet-pods 100000
    --rate 500 --gomemlimit, 2 cores, load 2; docs/scale.md). So the budget is the config's."""
    return {"GOGC": "off", "GOMEMLIMIT": f"{memory_mib * 3 // 4}MiB"}


OPA_GC_ENV = opa_gc_env()
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

OPA_AUTH_FLAGS = ("--authentication=token", "--authorization=basic")
"""`opa run` flags of every OPA that serves the gate (the in-cluster Deployment, the local
fleet's): bearer tokens identify callers, and `data.system.authz.allow`
(policies/system/authz.rego) decides every request. Without them anyone who reaches OPA could
replace the policies or the spend document through the API."""

AUTHZ_DATA_PATH = "fleetplane/authz/data.json"
"""Where the authz document sits under the directory OPA loads it from: OPA maps a `data.json`
file's directory to its path in `data`, so this file is `data.fleetplane.authz`."""

SPEND_FILE_KEY = "spend.json"
"""The spend document's key in the controller's ConfigMap."""
WORKLOADS_FILE_KEY = "workloads.json"
"""The workload records' key (`data.fleetplane.workloads`)."""
RESERVATIONS_FILE_KEY = "reservations.json"
"""The reservations' key (`data.fleetplane.reservations`)."""
APPROVAL_BINDINGS_FILE_KEY = "approval-bindings.json"
"""The approval bindings' key: `{id: {"uid": uid}}`, which OPA merges into the granted
approvals (`data.fleetplane.approvals`, rendered without `uid` so that the two files never
define the same value: OPA refuses to start on such a conflict)."""
CONTROLLER_DATA_FILES = {
    SPEND_FILE_KEY: "fleetplane/spend/data.json",
    WORKLOADS_FILE_KEY: "fleetplane/workloads/data.json",
    RESERVATIONS_FILE_KEY: "fleetplane/reservations/data.json",
    APPROVAL_BINDINGS_FILE_KEY: "fleetplane/approvals/data.json",
}
"""The documents the controller keeps for OPA to load at start: key of its ConfigMap
(`controller.opa_data_configmap`) -> path under the directory OPA loads them from, where OPA
maps `fleetplane/spend/data.json` to `data.fleetplane.spend` (and so on for the workload
records, the reservations and the approval bindings). The in-cluster Deployment mounts
the ConfigMap with these items, the local fleet writes the same files for its OPA: a restarted
OPA judges budgets on the last spend the controller published, before its next pass.

OPA reads them only at start, not with `--watch`: a watched file's change makes OPA write the
loaded files over the whole data tree, which would drop what the controller wrote through the
API since (and the kubelet updates a mounted ConfigMap a minute or more late, so it would also
bring back an older spend). Between starts the controller's writes through the API are what
OPA judges by."""


def controller_data_files(configmap_data: dict[str, str]) -> dict[str, str]:
    """The files OPA loads from the controller's ConfigMap (its `data`): path -> text, for the
    keys of CONTROLLER_DATA_FILES it has (a ConfigMap not written yet has none)."""
    return {
        path: configmap_data[key]
        for key, path in CONTROLLER_DATA_FILES.items()
        if key in configmap_data
    }


CONTROLLER_TOKEN_KEY = "token"
"""The key of the controller's bearer token in its Secret."""


def token_sha256(token: str) -> str:
    """The hex SHA-256 by which `data.fleetplane.authz.tokens` knows a bearer token (Rego's
    `crypto.sha256` of the token as OPA receives it)."""
    import hashlib

    return hashlib.sha256(token.encode()).hexdigest()


def authz_document(
    token_hashes: dict[str, str], *, anonymous: str | None = "webhook"
) -> dict[str, object]:
    """`data.fleetplane.authz` (docs/contracts.md): the hex SHA-256 of each bearer token -> its
    role, and the role of a request without a token (`webhook` where the API server calls the
    webhook without credentials, as on EKS and GKE; None where it presents a token)."""
    return {"tokens": dict(token_hashes), "anonymous": anonymous}
