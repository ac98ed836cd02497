"""The real node's network: a network namespace of its own, joined to the host by a veth pair.

The real node's containerd, kubelet and kube-proxy run in this namespace (`nsenter --net`), so
their pod bridge, iptables rules, ports (10250, 10256, ...) and sysctls are the node's alone: two
local fleets on one machine (a developer's `fleetplane up --real-node` and the e2e test) never
see each other's Service rules, and the host's own firewall is never touched.

Addresses of slot N (the first slot whose host link is free, kept in `network.json`):

    10.200.N.1   the host's end of the veth: the API server, the registry, Prometheus and the
                 cluster DNS listen here, so the node and its pods reach them
    10.200.N.2   the node's end (the node's InternalIP)
    10.201.N.0/24  pod addresses (the CNI bridge `cni0` in the namespace, gateway .1)
    10.202.N.0/24  Service ClusterIPs (the cluster's --service-cluster-ip-range)

The host routes the pod and Service ranges into the namespace, so the API server (on the host)
reaches pods directly and Services through the node's kube-proxy rules, as on a control-plane
node that runs kube-proxy itself. The host itself forwards nothing (its net.ipv4.ip_forward is
left as it is): it only sends to and receives from the namespace.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

SLOTS = range(1, 251)
HOST_LINK = "fpnode{slot}"
NAMESPACE = "fleetplane-node-{slot}"


class NodeNetworkError(RuntimeError):
    """The node's network could not be set up or torn down; the message names the command."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise NodeNetworkError(f"`ip {' '.join(args)}` failed: {result.stderr.strip()}")
    return result


@dataclass(frozen=True)
class NodeNetwork:
    """One slot's addresses and names (see the module docstring)."""

    slot: int

    @property
    def namespace(self) -> str:
        return NAMESPACE.format(slot=self.slot)

    @property
    def namespace_path(self) -> str:
        return f"/run/netns/{self.namespace}"

    @property
    def host_link(self) -> str:
        return HOST_LINK.format(slot=self.slot)

    @property
    def host_ip(self) -> str:
        return f"10.200.{self.slot}.1"

    @property
    def node_ip(self) -> str:
        return f"10.200.{self.slot}.2"

    @property
    def pod_cidr(self) -> str:
        return f"10.201.{self.slot}.0/24"

    @property
    def pod_gateway(self) -> str:
        return f"10.201.{self.slot}.1"

    @property
    def service_cidr(self) -> str:
        return f"10.202.{self.slot}.0/24"

    @property
    def kubernetes_service_ip(self) -> str:
        """The first address of the Service range: the `kubernetes` Service's ClusterIP."""
        return f"10.202.{self.slot}.1"

    def enter(self, cmd: list[str]) -> list[str]:
        """`cmd` run inside the node's network namespace (and nothing else of it: mounts,
        cgroups and processes stay the host's, as a kubelet needs them)."""
        return ["nsenter", f"--net={self.namespace_path}", "--", *cmd]

    # lifecycle ---------------------------------------------------------------------------

    @classmethod
    def create(cls, record: Path) -> NodeNetwork:
        """Take the first free slot: namespace, veth pair, addresses, routes, sysctls. The slot
        is written to `record` before anything else, so `destroy` finds it after a failure."""
        for slot in SLOTS:
            network = cls(slot)
            if Path(network.namespace_path).exists():
                continue
            # `ip netns add` is the claim: it fails when another fleet took the slot meanwhile.
            if _ip("netns", "add", network.namespace, check=False).returncode != 0:
                continue
            record.parent.mkdir(parents=True, exist_ok=True)
            record.write_text(json.dumps(asdict(network)))
            try:
                network._configure()
            except BaseException:
                network.destroy()
                raise
            return network
        raise NodeNetworkError(f"no free node network slot (links {HOST_LINK.format(slot='N')})")

    @classmethod
    def recorded(cls, record: Path) -> NodeNetwork | None:
        if not record.exists():
            return None
        return cls(int(json.loads(record.read_text())["slot"]))

    def _configure(self) -> None:
        _ip("link", "add", self.host_link, "type", "veth", "peer", "name", "eth0", "netns",
            self.namespace)  # fmt: skip
        _ip("addr", "add", f"{self.host_ip}/24", "dev", self.host_link)
        _ip("link", "set", self.host_link, "up")
        inside = ("-n", self.namespace)
        _ip(*inside, "addr", "add", f"{self.node_ip}/24", "dev", "eth0")
        _ip(*inside, "link", "set", "lo", "up")
        _ip(*inside, "link", "set", "eth0", "up")
        _ip(*inside, "route", "add", "default", "via", self.host_ip)
        for destination in (self.pod_cidr, self.service_cidr):
            _ip("route", "add", destination, "via", self.node_ip, "dev", self.host_link)
        # The node forwards between its veth and the pod bridge, and kube-proxy's rules must
        # see bridged traffic (a pod calling a Service whose endpoint is on the same bridge).
        # br_netfilter's switches are per namespace since Linux 5.3.
        for key, value in (
            ("net.ipv4.ip_forward", "1"),
            ("net.bridge.bridge-nf-call-iptables", "1"),
            ("net.bridge.bridge-nf-call-ip6tables", "1"),
        ):
            result = subprocess.run(
                self.enter(["sysctl", "-qw", f"{key}={value}"]), capture_output=True, text=True
            )
            if result.returncode != 0:
                raise NodeNetworkError(f"cannot set {key} in {self.namespace}: {result.stderr}")

    def destroy(self) -> None:
        """Remove the namespace (its end of the veth, the pod bridge and the node's iptables
        rules go with it) and the host's link and routes. Idempotent."""
        for destination in (self.pod_cidr, self.service_cidr):
            _ip("route", "del", destination, check=False)
        _ip("link", "del", self.host_link, check=False)
        with contextlib.suppress(NodeNetworkError):
            if Path(self.namespace_path).exists():
                _ip("netns", "del", self.namespace)
