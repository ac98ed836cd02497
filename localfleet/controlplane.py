"""A real Kubernetes control plane on loopback, with KWOK fake GPU and TPU nodes.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok run as plain processes on
free loopback ports, with a freshly generated CA, serving certificate, admin client certificate
and service-account key. Nodes are created from `localfleet.fakenodes` pools and KWOK keeps them
Ready and runs the pods scheduled onto them.

    fleetplane cluster up        # start (detached), create the fleet, print inventory
    fleetplane cluster status    # is it running? inventory
    fleetplane cluster down      # stop every process, remove the data (unless --keep)

The library form (`LocalCluster`) is what the test fixtures use.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localfleet import binaries
from localfleet.binaries import BIN_DIR, ROOT
from localfleet.dra_slices import dra_objects
from localfleet.pki import admin_kubeconfig, write_pki
from localfleet.processes import alive, free_ports, gone_by, http_ok, spawn
from localfleet.processes import free_port as free_port  # where tests and benchmarks import it
from localfleet.processes import proc_stat as proc_stat

DEFAULT_STATE_DIR = ROOT / ".fleet" / "local"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
NODE_LEASE_SECONDS = 40
"""What a kubelet sets on its node's Lease (renewed every quarter of it); kwok holds one
per fake node."""


class ClusterError(RuntimeError):
    """The local control plane could not be started or used; the message says which part."""


def require_binaries(directory: Path, names: tuple[str, ...]) -> dict[str, Path]:
    """The pinned binaries the local fleet needs; ClusterError when one is missing."""
    try:
        return binaries.require_binaries(directory, names)
    except binaries.MissingToolError as error:
        raise ClusterError(str(error)) from None


# --- the cluster ----------------------------------------------------------------------------


@dataclass
class LocalCluster:
    """etcd + kube-apiserver + controller-manager + scheduler + kwok on loopback.

    data_dir: where certs, etcd data, logs and the kubeconfig go (a temp dir when None).
    keep: keep data_dir on stop.
    detach: processes outlive this Python process (for `up`); `stop` finds them by pid file.
    bind_address: where the API server listens and what it advertises as the `kubernetes`
        Service's endpoint. Loopback by default; a real node (localfleet.realnode) needs an
        address its kubelet and pods reach, the host's end of the node's veth.
    service_cidr: the Service ClusterIP range (its first address is the `kubernetes` Service's).
    """

    data_dir: Path | None = None
    bin_dir: Path = BIN_DIR
    keep: bool = False
    detach: bool = False
    log: Callable[[str], None] = field(default=lambda message: None)
    bind_address: str = "127.0.0.1"
    service_cidr: str = "10.0.0.0/24"
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, init=False)
    ports: dict[str, int] = field(default_factory=dict, init=False)
    _temp: bool = field(default=False, init=False)

    @property
    def kubeconfig(self) -> Path:
        assert self.data_dir is not None
        return self.data_dir / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://{self.bind_address}:{self.ports['apiserver']}"

    @property
    def logs_dir(self) -> Path:
        assert self.data_dir is not None
        return self.data_dir / "logs"

    # lifecycle ---------------------------------------------------------------------------

    def start(self, *, timeout: float = 120.0) -> LocalCluster:
        binaries = require_binaries(self.bin_dir, (*COMPONENTS, "kwok-stages.yaml", "kubectl"))
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="fleetplane-cluster-"))
            self._temp = True
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if (self.data_dir / "pids.json").exists() and self.running_pids():
            raise ClusterError(f"a local cluster is already running from {self.data_dir}")
        self.logs_dir.mkdir(exist_ok=True)
        pki = self.data_dir / "pki"
        write_pki(pki, extra_ips=(self.bind_address, _first_address(self.service_cidr)))
        names = ("etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler", "kwok")
        self.ports = dict(zip(names, free_ports(len(names)), strict=True))
        deadline = time.monotonic() + timeout
        try:
            self._start_etcd(binaries["etcd"], deadline)
            self._start_apiserver(binaries["kube-apiserver"], pki, deadline)
            self.kubeconfig.write_text(admin_kubeconfig(self.server, pki))
            self._spawn(
                "kube-controller-manager",
                [
                    str(binaries["kube-controller-manager"]),
                    f"--kubeconfig={self.kubeconfig}",
                    f"--authentication-kubeconfig={self.kubeconfig}",
                    f"--authorization-kubeconfig={self.kubeconfig}",
                    f"--root-ca-file={pki / 'ca.crt'}",
                    f"--service-account-private-key-file={pki / 'sa.key'}",
                    # Each controller with its own ServiceAccount, as kubeadm, EKS and GKE
                    # run it: the gate trusts the owner references and template copies of
                    # those identities (fleet/render.py KUBE_WORKLOAD_CONTROLLERS), not the
                    # admin certificate.
                    "--use-service-account-credentials=true",
                    "--leader-elect=false",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={self.ports['controller-manager']}",
                    # kwok nodes have no kubelet: node IPAM and cloud routes are not wanted here.
                    "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller",
                ],
            )
            self._spawn(
                "kube-scheduler",
                [
                    str(binaries["kube-scheduler"]),
                    f"--kubeconfig={self.kubeconfig}",
                    f"--authentication-kubeconfig={self.kubeconfig}",
                    f"--authorization-kubeconfig={self.kubeconfig}",
                    "--leader-elect=false",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={self.ports['scheduler']}",
                ],
            )
            self._spawn(
                "kwok",
                [
                    str(binaries["kwok"]),
                    f"--kubeconfig={self.kubeconfig}",
                    f"--config={binaries['kwok-stages.yaml']}",
                    "--manage-all-nodes=false",
                    "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                    # The stages post a node's status every 10-20 minutes and leave liveness to
                    # the node's Lease, as a kubelet does; without leases the node lifecycle
                    # controller finds every fake node silent after its grace period, marks it
                    # Unknown and taints it unreachable until kwok posts again (schedulers skip
                    # it meanwhile, and after 300 s its pods are evicted).
                    f"--node-lease-duration-seconds={NODE_LEASE_SECONDS}",
                    f"--server-address=127.0.0.1:{self.ports['kwok']}",
                    "--node-ip=10.0.0.10",
                    "--cidr=10.0.128.0/17",
                ],
            )
            self.wait_until(
                "the default ServiceAccount (kube-controller-manager)",
                lambda: (
                    self.kubectl(
                        "get", "serviceaccount", "default", "-n", "default", check=False
                    ).returncode
                    == 0
                ),
                deadline,
            )
        except BaseException:
            self.stop()
            raise
        self._write_pids()
        return self

    def stop(self) -> None:
        """Stop every process (SIGTERM, then SIGKILL after 10 s) and remove temp data."""
        pids = {name: proc.pid for name, proc in self.processes.items()}
        if not pids and self.data_dir is not None:
            pids = self._read_pids()
        for name in reversed(COMPONENTS):
            pid = pids.get(name)
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for name in reversed(COMPONENTS):
            pid = pids.get(name)
            if pid is None:
                continue
            proc = self.processes.get(name)
            if not gone_by(pid, deadline, proc):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                # A killed process takes a moment to go (longer on a busy machine): `down`
                # returns only once it has, so nothing is left running behind it.
                gone_by(pid, time.monotonic() + 10, proc)
        for proc in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        self.processes.clear()
        if self.data_dir is not None:
            (self.data_dir / "pids.json").unlink(missing_ok=True)
            if not self.keep:
                shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # processes ---------------------------------------------------------------------------

    def _spawn(self, name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
        self.log(f"starting {name}")
        proc = spawn(cmd, self.logs_dir / f"{name}.log")
        self.processes[name] = proc
        return proc

    def _start_etcd(self, etcd: Path, deadline: float) -> None:
        assert self.data_dir is not None
        client = f"http://127.0.0.1:{self.ports['etcd']}"
        peer = f"http://127.0.0.1:{self.ports['etcd-peer']}"
        self._spawn(
            "etcd",
            [
                str(etcd),
                "--name=local",
                f"--data-dir={self.data_dir / 'etcd'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=local={peer}",
                # Test and local data only: skipping fsync makes etcd several times faster here.
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        self.wait_until("etcd", lambda: http_ok(f"{client}/health"), deadline)

    def _start_apiserver(self, apiserver: Path, pki: Path, deadline: float) -> None:
        self._spawn(
            "kube-apiserver",
            [
                str(apiserver),
                f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
                "--etcd-prefix=/registry",
                "--allow-privileged=true",
                # On loopback nothing but the host can use the `kubernetes` Service's endpoint;
                # on a real node's address, pods reach the API server through it.
                "--endpoint-reconciler-type="
                + ("none" if self.bind_address == "127.0.0.1" else "lease"),
                f"--bind-address={self.bind_address}",
                f"--advertise-address={self.bind_address}",
                # `kubectl logs` and `exec` on a real node: the API server calls its kubelet at
                # the node's InternalIP (nodes have no resolvable hostname here), as admin.
                "--kubelet-preferred-address-types=InternalIP,Hostname",
                f"--kubelet-client-certificate={pki / 'admin.crt'}",
                f"--kubelet-client-key={pki / 'admin.key'}",
                f"--secure-port={self.ports['apiserver']}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--authorization-mode=Node,RBAC",
                f"--service-cluster-ip-range={self.service_cidr}",
            ],
        )
        context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        self.wait_until(
            "kube-apiserver /readyz",
            lambda: http_ok(f"{self.server}/readyz", context=context),
            deadline,
        )

    def wait_until(self, what: str, ready: Callable[[], bool], deadline: float) -> None:
        """Wait for `ready()` until the monotonic `deadline`; ClusterError (with the logs) when
        a component exits first or the deadline passes."""
        self.log(f"waiting for {what}")
        while time.monotonic() < deadline:
            for name, proc in self.processes.items():
                if proc.poll() is not None:
                    raise ClusterError(
                        f"{name} exited with {proc.returncode} while waiting for {what}:\n"
                        + self.log_tail(name)
                    )
            if ready():
                return
            time.sleep(0.2)
        raise ClusterError(
            f"timed out waiting for {what}\n"
            + "\n".join(self.log_tail(name) for name in self.processes)
        )

    _wait = wait_until  # the name a test of the replay still uses

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.logs_dir / f"{name}.log"
        if not path.exists():
            return f"--- {name}: no log"
        text = path.read_text(errors="replace").splitlines()[-lines:]
        return f"--- {name} ({path}):\n" + "\n".join(text)

    def _write_pids(self) -> None:
        assert self.data_dir is not None
        state = {
            "pids": {name: proc.pid for name, proc in self.processes.items()},
            "ports": self.ports,
            "bind_address": self.bind_address,
            "kubeconfig": str(self.kubeconfig),
        }
        (self.data_dir / "pids.json").write_text(json.dumps(state, indent=2))

    def _read_pids(self) -> dict[str, int]:
        assert self.data_dir is not None
        path = self.data_dir / "pids.json"
        if not path.exists():
            return {}
        state = json.loads(path.read_text())
        self.ports = state.get("ports", {})
        self.bind_address = state.get("bind_address", self.bind_address)
        return {name: int(pid) for name, pid in state.get("pids", {}).items()}

    def running_pids(self) -> dict[str, int]:
        return {name: pid for name, pid in self._read_pids().items() if alive(pid)}

    # using it ----------------------------------------------------------------------------

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run the pinned kubectl against this cluster; raise ClusterError on failure if check."""
        cmd = [str(self.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args]
        result = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            raise ClusterError(
                f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
            )
        return result

    def apply(self, objects: list[dict[str, Any]]) -> None:
        self.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            "-",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
        )

    def create_nodes(self, nodes: list[dict[str, Any]], *, timeout: float = 120.0) -> None:
        """Create fake nodes, with the ResourceSlices NVIDIA's DRA driver would publish for their
        GPUs (localfleet/dra_slices.py), and wait until KWOK reports every node Ready."""
        self.kubectl(
            "create",
            "-f",
            "-",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}),
        )
        published = dra_objects(nodes)
        if published:
            self.apply(published)
        names = {node["metadata"]["name"] for node in nodes}
        self.wait_until(
            f"{len(names)} fake nodes Ready (kwok)",
            lambda: (
                names
                <= {
                    node["metadata"]["name"]
                    for node in self.get_json("nodes")["items"]
                    if _node_ready(node)
                }
            ),
            time.monotonic() + timeout,
        )

    def get_json(self, *args: str) -> dict[str, Any]:
        return dict(json.loads(self.kubectl("get", *args, "-o", "json").stdout))


def _first_address(cidr: str) -> str:
    import ipaddress

    return str(next(ipaddress.ip_network(cidr).hosts()))


def _node_ready(node: dict[str, Any]) -> bool:
    return any(
        condition.get("type") == "Ready" and condition.get("status") == "True"
        for condition in node.get("status", {}).get("conditions", [])
    )


# --- inventory ------------------------------------------------------------------------------

ACCELERATOR_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-", "google.com/tpu")


def inventory(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Accelerators per pool: nodes, ready nodes, resource, model, capacity type, totals."""
    pools: dict[str, dict[str, Any]] = {}
    for node in nodes:
        labels = node["metadata"].get("labels", {})
        allocatable = node.get("status", {}).get("allocatable", {})
        resources = {
            k: int(v) for k, v in allocatable.items() if k.startswith(ACCELERATOR_PREFIXES)
        }
        if not resources:
            continue
        pool = (
            labels.get("fleetplane.dev/pool") or labels.get("cloud.google.com/gke-nodepool") or "-"
        )
        entry = pools.setdefault(
            pool,
            {
                "pool": pool,
                "model": labels.get("nvidia.com/gpu.product")
                or labels.get("cloud.google.com/gke-tpu-accelerator", "-"),
                "capacity_type": labels.get("fleetplane.dev/capacity-type", "-"),
                "nodes": 0,
                "ready": 0,
                "accelerators": {},
            },
        )
        entry["nodes"] += 1
        entry["ready"] += int(_node_ready(node))
        for resource, count in resources.items():
            entry["accelerators"][resource] = entry["accelerators"].get(resource, 0) + count
    return sorted(pools.values(), key=lambda entry: entry["pool"])


def format_inventory(rows: list[dict[str, Any]]) -> str:
    header = f"{'POOL':16} {'MODEL':28} {'CAPACITY':10} {'NODES':>7} {'ACCELERATORS'}"
    lines = [header]
    totals: dict[str, int] = {}
    for row in rows:
        accelerators = ", ".join(
            f"{count} {resource}" for resource, count in row["accelerators"].items()
        )
        for resource, count in row["accelerators"].items():
            totals[resource] = totals.get(resource, 0) + count
        nodes = f"{row['ready']}/{row['nodes']}"
        lines.append(
            f"{row['pool']:16} {row['model']:28} {row['capacity_type']:10} {nodes:>7} {accelerators}"
        )
    lines.append("total: " + ", ".join(f"{count} {resource}" for resource, count in totals.items()))
    return "\n".join(lines)
