"""The real Karpenter on the local control plane: the pinned release's core with its KWOK cloud
provider (`karpenter-kwok`, tools/bootstrap/karpenter.py) as a process, its CRDs, and the
fleet's Karpenter pools as NodePools over one KWOKNodeClass (`fleet.karpenter`).

What Karpenter does here is what it does in a cluster, with KWOK for the cloud: it watches
pending pods, picks the NodePool and the cheapest instance type that fits, creates a NodeClaim,
and its KWOK provider creates the Node object. That Node carries the annotation
`kwok.x-k8s.io/node: fake`, which is what the local kwok process manages
(`localfleet.controlplane`), so the same kwok stages make it Ready and keep its lease; Karpenter
then registers it (removes its `unregistered` taint) and the scheduler binds the pods.
Consolidation deletes the NodeClaim and Karpenter's termination controller drains and deletes
the Node, as on EKS.

The instance types come from the fleet (`fleet.karpenter.kwok_instance_types`): the pool's
machine type with its accelerators, and one offering per capacity type priced from the
configured per-accelerator prices.

One difference from a cloud node, from the KWOK provider itself: a node's `status.capacity` is
what its NodeClaim requested (the pods that brought it), while `status.allocatable` is the whole
instance type; the labels the product reads (`nvidia.com/gpu.count` among them) are the
NodePool's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fleet.config import ClusterConfig, FleetConfig
from fleet.karpenter import karpenter_manifests, karpenter_pools, kwok_instance_types
from localfleet.binaries import bin_dir as pinned_bin_dir
from localfleet.controlplane import ClusterError, LocalCluster, free_ports, require_binaries
from localfleet.operators import install_crd_files
from localfleet.pki import client_certificate, client_kubeconfig
from localfleet.processes import ServerError, Supervisor, http_ok

BINARY = "karpenter-kwok"
CRDS_FILE = "karpenter-crds.yaml"
NAMESPACE = "karpenter"
IDENTITY = "system:serviceaccount:karpenter:karpenter"
"""Who Karpenter is to the API server and the admission gate: the chart's ServiceAccount (its
client certificate carries system:masters for the chart's ClusterRoles)."""


@dataclass
class LocalKarpenter:
    """Karpenter-kwok on a running local cluster, scaling the Karpenter pools of `cluster`.

    batch_idle and batch_max: how long Karpenter gathers pending pods before it provisions (its
    defaults, 1 s and 10 s, as in a cluster; tests may shorten them). Detached (`fleetplane
    up`), the process outlives the command and is found again by its pid file in
    `<cluster data>/karpenter/`; attached (tests), it dies with the test run."""

    cluster: LocalCluster
    fleet: FleetConfig
    fleet_cluster: ClusterConfig
    bin_dir: Path = field(default_factory=pinned_bin_dir)
    log: Callable[[str], None] = field(default=lambda message: None)
    detached: bool = True
    batch_idle: str = "1s"
    batch_max: str = "10s"
    log_level: str = "info"
    ports: dict[str, int] = field(default_factory=dict, init=False)
    supervisor: Supervisor = field(init=False)

    def __post_init__(self) -> None:
        self.supervisor = Supervisor("karpenter", self.work_dir, detached=self.detached)

    @property
    def work_dir(self) -> Path:
        return work_dir(self.cluster)

    def start(self, *, timeout: float = 120.0, pools: bool = True) -> LocalKarpenter:
        """Install the CRDs, start the process and wait for its readiness; with `pools`, apply
        the NodePools too (`fleetplane up` leaves them to Pulumi, which declares them through
        `components.karpenter`)."""
        require_binaries(self.bin_dir, (BINARY, CRDS_FILE))
        if self.supervisor.pid() is not None:
            raise ClusterError(f"Karpenter is already running from {self.work_dir}")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.ports = dict(zip(("metrics", "health"), free_ports(2), strict=True))
        try:
            install_crd_files(self.cluster, self.bin_dir, [CRDS_FILE], "Karpenter's CRDs")
            self.cluster.apply(
                [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}]
            )
            self.write_files()
            self.log("starting karpenter-kwok")
            ready = f"http://127.0.0.1:{self.ports['health']}/readyz"
            self.supervisor.run(
                [str(self.bin_dir / BINARY)],
                lambda: http_ok(ready),
                timeout=timeout,
                env=self.environment(),
            )
            if pools:
                self.apply_pools()
        except ServerError as error:
            self.stop()
            raise ClusterError(str(error)) from error
        except BaseException:
            self.stop()
            raise
        return self

    def write_files(self) -> None:
        """The instance types file and Karpenter's kubeconfig (a client certificate)."""
        (self.work_dir / "instance-types.json").write_text(
            json.dumps(kwok_instance_types(self.fleet, self.fleet_cluster), indent=2)
        )
        pki = self.cluster.data_dir / "pki"  # type: ignore[operator]
        client_certificate(pki, "karpenter", common_name=IDENTITY, organization="system:masters")
        config = json.loads(self.cluster.kubeconfig.read_text())
        server = str(config["clusters"][0]["cluster"]["server"])
        (self.work_dir / "kubeconfig").write_text(client_kubeconfig(server, pki, "karpenter"))

    def environment(self) -> dict[str, str]:
        """Karpenter reads its settings from the environment, as its chart sets them."""
        return {
            "KUBECONFIG": str(self.work_dir / "kubeconfig"),
            "SYSTEM_NAMESPACE": NAMESPACE,
            "INSTANCE_TYPES_FILE_PATH": str(self.work_dir / "instance-types.json"),
            "DISABLE_LEADER_ELECTION": "true",
            "METRICS_PORT": str(self.ports["metrics"]),
            "HEALTH_PROBE_PORT": str(self.ports["health"]),
            "BATCH_IDLE_DURATION": self.batch_idle,
            "BATCH_MAX_DURATION": self.batch_max,
            "LOG_LEVEL": self.log_level,
            # the chart's default gates; spot-to-spot consolidation stays off as there
            "FEATURE_GATES": "NodeRepair=false,ReservedCapacity=true,"
            "SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false",
        }

    def apply_pools(self) -> None:
        """The KWOKNodeClass and the NodePools of the fleet's Karpenter pools."""
        manifests = karpenter_manifests(self.fleet, self.fleet_cluster)
        if manifests:
            self.cluster.apply(manifests)

    def stop(self) -> None:
        self.supervisor.stop()

    def running(self) -> bool:
        return self.supervisor.pid() is not None

    def log_tail(self) -> str:
        return self.supervisor.log_tail()


def karpenter_cluster(fleet: FleetConfig) -> ClusterConfig | None:
    """The local cluster with Karpenter pools, if any (Karpenter runs beside it)."""
    return next((c for c in fleet.clusters if c.provider == "local" and karpenter_pools(c)), None)


def ensure_karpenter(
    cluster: LocalCluster, fleet: FleetConfig, *, bin_dir: Path, log: Callable[[str], None]
) -> None:
    """What `fleetplane up` runs before `pulumi up` when the fleet has local Karpenter pools:
    the CRDs and Karpenter, started unless it runs. The NodePools are the stack's (Pulumi
    declares them)."""
    local = karpenter_cluster(fleet)
    if local is None:
        return
    karpenter = LocalKarpenter(
        cluster=cluster, fleet=fleet, fleet_cluster=local, bin_dir=bin_dir, log=log
    )
    if karpenter.running():
        return
    started = time.monotonic()
    karpenter.start(pools=False)
    log(f"karpenter-kwok up in {time.monotonic() - started:.1f}s (as {IDENTITY})")


def work_dir(cluster: LocalCluster) -> Path:
    """Karpenter's files: kubeconfig, instance types, log, and (detached) its pid file."""
    assert cluster.data_dir is not None
    return cluster.data_dir / "karpenter"


def stop_karpenter(cluster: LocalCluster) -> None:
    """What `fleetplane down` runs: stop the Karpenter `up` started, found by its pid file (the
    fleet configuration is not read: `down` works with a broken one too)."""
    Supervisor("karpenter", work_dir(cluster), detached=True).stop()
