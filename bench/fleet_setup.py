"""What bench/controller_pass.py gives a pass, and how it makes a fleet fast.

What the product gives a pass (a clean clone has none of it):
- a bearer token for OPA, whose hash OPA's authz document gives the controller role, with OPA
  started as the gate's is (`--authentication=token --authorization=basic`, the configuration
  loaded from files at start: with authz on, only the controller's token may write data);
- the system namespace (`fleetplane-system`) where the controller keeps its Lease and the
  ConfigMap of the documents OPA loads at start;
- a Pushgateway the pass pushes its summary to.

Making the fleet: the nodes through the API (kwok keeps them Ready), the pods written straight
into etcd as scale tests of Kubernetes do (kubemark and ClusterLoader's "etcd prefill"): a pod
through the API costs two requests (the create, then its Running status, which a create
ignores) and the API server's admission and validation; written to etcd it costs 1/128 of an
etcd transaction. The API server reads an object stored as JSON as well as its own protobuf
(its storage decoder recognises both), and its watch cache sees the writes through its etcd
watch, so the pods are ordinary API objects to every client. Each pod is written Running with
its pod and host IP: kwok's `pod-ready` Stage selects pods still Pending, so it never touches
them (through the API, kwok queued a Stage for every pod it saw Pending and patched each one at
~50/s, which is why the old bench waited for kwok to settle).
"""

from __future__ import annotations

import base64
import json
import secrets
import time
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import requests

from controller.errors import TemporaryError
from controller.observe.kube import KubeClient
from localfleet.controlplane import LocalCluster
from localfleet.servers import OpaServer, PushgatewayServer

TXN_OPS = 128
"""etcd's default `--max-txn-ops`: puts per transaction."""
SYSTEM_NAMESPACE = "fleetplane-system"


def product_opa(state_dir: Path, config: dict[str, Any]) -> tuple[OpaServer, Path]:
    """OPA as the gate's (token authentication, authz, the configuration loaded at start) and
    the controller's token file; not started."""
    from fleet.opa import authz_document, token_sha256
    from fleet.opa_data import gate_data
    from fleet.project import policies_dir

    token = secrets.token_urlsafe(32)
    token_file = state_dir / "opa-token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    data_dir = state_dir / "opa-data"
    data_dir.mkdir(parents=True, exist_ok=True)
    root = policies_dir()
    sources = {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*.rego"))
        if not p.name.endswith("_test.rego")
    }
    # the gate's data ConfigMap (components/policy_gate.py): anchors, configuration, revision
    document = gate_data(sources, config, {})
    (data_dir / "data.json").write_text(json.dumps(document))
    opa = OpaServer(
        work_dir=state_dir / "opa",
        data=(data_dir,),
        authz=authz_document({token_sha256(token): "controller"}),
    )
    return opa, token_file


def pushgateway(state_dir: Path) -> PushgatewayServer:
    return PushgatewayServer(work_dir=state_dir / "pushgateway")


def etcd_url(cluster: LocalCluster) -> str:
    """The cluster's etcd client URL (a kept cluster's from its API server's command line)."""
    if "etcd" in cluster.ports:
        return f"http://127.0.0.1:{cluster.ports['etcd']}"
    pid = cluster.running_pids()["kube-apiserver"]
    args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    for arg in args:
        if arg.startswith(b"--etcd-servers="):
            return arg.split(b"=", 1)[1].decode().split(",")[0]
    raise SystemExit("kube-apiserver has no --etcd-servers")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def stored_pod(pod: dict[str, Any], serial: int, created: str) -> dict[str, Any]:
    """`pod` as the API server would store it once created, scheduled and Running: uid,
    creation time, the defaults it fills in, and a Running status with pod and host IP."""
    metadata = {
        **pod["metadata"],
        "uid": str(uuid.UUID(int=serial + (1 << 120))),
        "creationTimestamp": created,
    }
    spec = {
        "restartPolicy": "Always",
        "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "enableServiceLinks": True,
        "priority": 0,
        "preemptionPolicy": "PreemptLowerPriority",
        **pod["spec"],
        "containers": [
            {
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
                "resources": {},
                **c,
            }
            for c in pod["spec"]["containers"]
        ],
    }
    ip = f"10.{(serial >> 16) & 255}.{(serial >> 8) & 255}.{serial & 255}"
    host = pod["spec"]["nodeName"]
    index = int(host.rsplit("-", 1)[-1])
    host_ip = f"172.{16 + ((index >> 16) & 15)}.{(index >> 8) & 255}.{index & 255}"
    status = {
        "phase": "Running",
        "qosClass": "BestEffort",
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": created,
        "conditions": [
            {"type": kind, "status": "True", "lastTransitionTime": created}
            for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "containerStatuses": [
            {
                "name": c["name"],
                "image": c["image"],
                "imageID": "",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": created}},
            }
            for c in pod["spec"]["containers"]
        ],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def write_pods_to_etcd(
    etcd: str, pods: Iterable[tuple[int, dict[str, Any]]], *, threads: int = 4
) -> int:
    """Put each (serial, pod) at /registry/pods/<namespace>/<name>, TXN_OPS per transaction
    of etcd's JSON gateway; the number written."""
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    batches: list[list[dict[str, Any]]] = [[]]
    for serial, pod in pods:
        if len(batches[-1]) == TXN_OPS:
            batches.append([])
        metadata = pod["metadata"]
        key = f"/registry/pods/{metadata['namespace']}/{metadata['name']}".encode()
        value = orjson.dumps(stored_pod(pod, serial, created))
        batches[-1].append({"requestPut": {"key": _b64(key), "value": _b64(value)}})
    session = requests.Session()

    def put(batch: list[dict[str, Any]]) -> int:
        response = session.post(f"{etcd}/v3/kv/txn", json={"success": batch}, timeout=60)
        if response.status_code != 200:
            raise SystemExit(f"etcd txn: HTTP {response.status_code}: {response.text[:300]}")
        return len(batch)

    with ThreadPoolExecutor(max_workers=threads) as workers:
        return sum(workers.map(put, [b for b in batches if b]))


def cache_at_least(revision: str) -> dict[str, str]:
    """List parameters that only the API server's watch cache serves, once it has caught up
    with etcd's `revision`: it waits up to 3 s for it, then answers 504 "Too large resource
    version", which the list asks again (observe/cache_lag.py) and the settle loop counts as
    not settled. A consistent list (the controller's) may be answered from etcd while the
    cache is behind, so its success proves nothing; its continue pages then come from the
    cache, and the first pass of a fresh cluster failed on that."""
    return {"resourceVersion": revision, "resourceVersionMatch": "NotOlderThan"}


def count_pods(client: KubeClient) -> tuple[int, int, str]:
    """(pods, pods not Running, etcd's revision): the total from a consistent list (a one-item
    page's `remainingItemCount`), the others by field selector from the API server's watch
    cache once it has that revision (`cache_at_least`; a selected list from etcd reads every
    pod, over a minute at 50,000)."""
    page = client.request("GET", "/api/v1/pods", params={"limit": 1})
    metadata = page.get("metadata") or {}
    total = len(page.get("items") or []) + int(metadata.get("remainingItemCount") or 0)
    revision = str(metadata.get("resourceVersion") or "0")
    pending = sum(
        len(items)
        for items in client.list_pages(
            "/api/v1/pods",
            limit=5000,
            params={"fieldSelector": "status.phase!=Running", **cache_at_least(revision)},
        )
    )
    return total, pending, revision


def ready_nodes(client: KubeClient, revision: str) -> tuple[int, int]:
    """(nodes, of which Ready), from the watch cache once it has etcd's `revision`."""
    listed = ready = 0
    pages = client.list_pages("/api/v1/nodes", limit=5000, params=cache_at_least(revision))
    for page in pages:
        for node in page:
            listed += 1
            ready += any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (node.get("status") or {}).get("conditions") or []
            )
    return listed, ready


def wait_for_fleet(
    client: KubeClient, nodes: int, pods: int, *, limit: float = 600, log: Any = print
) -> float:
    """Until the API server has `pods` pods, all Running, and `nodes` nodes, its watch cache
    of both caught up with etcd (counted by lists, which hold at any size, where kwok's CPU
    never fell under a threshold at 5,000 nodes; the cache, so the first pass's lists do not
    race it); the seconds waited. SystemExit past `limit`."""
    started = time.monotonic()
    total = pending = ready = listed = 0
    while True:
        try:
            total, pending, revision = count_pods(client)
            listed, ready = ready_nodes(client, revision)
            counted = True
        except TemporaryError as error:
            counted = False  # a count failed, the cache may be behind: not settled
            log(f"counting the fleet: {error}; again")
        waited = time.monotonic() - started
        # Nodes must exist, not be Ready: at 10,000 nodes on a busy machine kwok renews their
        # Leases late and some go Unknown for a while, which the pass does not read.
        if counted and total >= pods and pending == 0 and listed >= nodes:
            log(
                f"fleet ready: {listed} nodes ({ready} Ready), {total} pods all Running "
                f"({waited:.0f}s)"
            )
            return waited
        if waited > limit:
            raise SystemExit(
                f"fleet not ready after {limit:.0f}s: {listed}/{nodes} nodes, "
                f"{total}/{pods} pods, {pending} not Running"
            )
        time.sleep(3)
