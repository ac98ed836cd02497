"""One real Kubernetes node beside the KWOK fake ones: containerd, runc, the CNI plugins, the
kubelet and kube-proxy of the pinned release, joined to the local control plane.

It is the fleet's system pool: the platform's own pods (OPA, the controller's Jobs) carry no
accelerator toleration and every fake node is tainted for its accelerator (fleet.nodes), so
the scheduler can place them here only. The node carries `fleetplane.dev/pool=system`, has
no accelerator taint, and no KWOK annotation (KWOK manages only nodes annotated
`kwok.x-k8s.io/node=fake`, see localfleet.controlplane).

Everything runs as plain processes under `work_dir` with logs in `work_dir/logs`:

- a registry on the host end of the node's veth (localfleet.registry): the node pulls images by
  digest from there, the sandbox's pause image (catatonit -P, one file) among them;
- the cluster DNS stand-in on the same address (localfleet.clusterdns);
- in the node's network namespace (localfleet.nodenet): containerd (CRI with
  `restrict_oom_score_adj`, runc with cgroupfs, a bridge CNI network), the kubelet (client
  certificate CN `system:node:<name>`, O `system:nodes`, from the cluster's CA; cgroup v1 with
  `failCgroupV1: false`, cgroupfs, pods under a cgroup root of its own) and kube-proxy (iptables
  mode, client certificate CN `system:kube-proxy`).

What a cloud node does that this one does not (README: "What runs for real here"): the
kubelet's own oom_score_adj and the node's sysctls are left as the host has them, there is no
cloud provider, image credential provider, CSI or device plugin, and the pod network is one
bridge on one node.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localfleet.binaries import BIN_DIR
from localfleet.controlplane import ClusterError, LocalCluster, require_binaries
from localfleet.nodenet import NodeNetwork
from localfleet.pki import client_certificate, client_kubeconfig
from localfleet.processes import alive, gone_by, spawn
from localfleet.registry import Registry

NODE_NAME = "system-0"
SYSTEM_POOL = "system"
PAUSE_REPOSITORY = "fleetplane/pause"
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROCESSES = ("registry", "clusterdns", "containerd", "kubelet", "kube-proxy")
BINARIES = (
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
    "runc",
    "kubelet",
    "kube-proxy",
    "registry",
    "catatonit",
    "cni/bridge",
    "cni/host-local",
    "cni/loopback",
    "cni/portmap",
    "iptables/iptables",
)


class RealNodeError(ClusterError):
    """The real node could not be started or stopped; the message names the part and its log."""


@dataclass
class RealNode:
    """The real node of `cluster`, on `network` (whose host address the API server binds)."""

    cluster: LocalCluster
    network: NodeNetwork
    work_dir: Path
    name: str = NODE_NAME
    bin_dir: Path = BIN_DIR
    log: Callable[[str], None] = field(default=lambda message: None)
    registry_port: int = 0

    # paths ---------------------------------------------------------------------------------

    @property
    def logs_dir(self) -> Path:
        return self.work_dir / "logs"

    @property
    def socket(self) -> Path:
        return self.work_dir / "containerd" / "containerd.sock"

    @property
    def kubelet_dir(self) -> Path:
        return self.work_dir / "kubelet"

    @property
    def registry_address(self) -> str:
        """host:port of the node's registry, as image references name it."""
        return f"{self.network.host_ip}:{self.registry_port}"

    @property
    def dns_address(self) -> str:
        return self.network.host_ip

    @property
    def cgroup_root(self) -> str:
        """The cgroup (in every v1 hierarchy) under which the kubelet puts its pods: one per
        node, so two local fleets on one machine never share `kubepods`."""
        return f"/fleetplane/{self.network.namespace}"

    @property
    def pki(self) -> Path:
        assert self.cluster.data_dir is not None
        return self.cluster.data_dir / "pki"

    # lifecycle -----------------------------------------------------------------------------

    def start(self, *, timeout: float = 300.0) -> RealNode:
        binaries = require_binaries(self.bin_dir, BINARIES)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(exist_ok=True)
        deadline = time.monotonic() + timeout
        try:
            self._start_registry()
            pause = self._push_pause_image(binaries["catatonit"])
            self._start_dns()
            self._make_cgroup_root()
            self._start_containerd(binaries, pause, deadline)
            self._start_kubelet(binaries["kubelet"])
            self._start_kube_proxy(binaries["kube-proxy"])
            self._wait(f"node {self.name} Ready (kubelet)", self._ready, deadline)
        except BaseException:
            self.stop()
            raise
        self._write_state()
        return self

    def stop(self) -> None:
        """Stop kube-proxy and the kubelet, kill every pod's containers, stop containerd, then
        undo what they leave behind: mounts under work_dir, pod network namespaces, the cgroup
        root. Idempotent; the node's network itself is its owner's to remove."""
        state = self._read_state()
        pids = state.get("pids", {})
        for name in ("kube-proxy", "kubelet"):
            self._kill(name, pids.get(name))
        netns = self._kill_containers()
        for name in ("containerd", "clusterdns", "registry"):
            self._kill(name, pids.get(name))
        self._unmount_under(self.work_dir)
        for path in netns:
            subprocess.run(["umount", "-l", path], capture_output=True)
            with contextlib.suppress(OSError):
                os.unlink(path)
        self._remove_cgroup_root()
        (self.work_dir / "state.json").unlink(missing_ok=True)

    # the parts -----------------------------------------------------------------------------

    def _start_registry(self) -> None:
        # detached: it serves the node as long as the node runs, after `fleetplane up` exits
        registry = Registry(
            bin_dir=self.bin_dir,
            work_dir=self.work_dir / "registry",
            host=self.network.host_ip,
            detached=True,
        )
        registry.start()
        pid = registry.pid()
        assert pid is not None
        self.registry_port = registry.port
        self._pids["registry"] = pid
        self.log(f"registry for the real node at {self.registry_address}")

    def _push_pause_image(self, catatonit: Path) -> str:
        """The sandbox image: catatonit as `-P` (a pause process), one file, pushed by digest."""
        from images import oci
        from images.push import push

        layout = self.work_dir / "pause-image"
        shutil.rmtree(layout, ignore_errors=True)
        layer = oci.write_layer(
            layout,
            oci.layer_from_entries(
                [oci.Entry(path="catatonit", data=catatonit.read_bytes(), mode=0o755)]
            ),
            "catatonit -P: the pod sandbox's pause process",
        )
        oci.write_image(
            layout,
            [layer],
            oci.ImageConfig(entrypoint=["/catatonit", "-P"], user="65535"),
            ref_name="catatonit",
        )
        return push(layout, self.registry_address, PAUSE_REPOSITORY)

    def _start_dns(self) -> None:
        import sys

        self._spawn(
            "clusterdns",
            [
                sys.executable,
                "-m",
                "localfleet.clusterdns",
                f"--listen={self.dns_address}:53",
                f"--kubeconfig={self.cluster.kubeconfig}",
            ],
            host=True,
        )

    def _make_cgroup_root(self) -> None:
        for hierarchy in _v1_hierarchies():
            path = hierarchy / self.cgroup_root.lstrip("/")
            parent = hierarchy
            for part in self.cgroup_root.strip("/").split("/"):
                child = parent / part
                child.mkdir(exist_ok=True)
                if hierarchy.name == "cpuset":  # a cpuset cgroup starts empty: inherit
                    for key in ("cpuset.cpus", "cpuset.mems"):
                        if not (child / key).read_text().strip():
                            (child / key).write_text((parent / key).read_text())
                parent = child
            assert path.is_dir()

    def _remove_cgroup_root(self) -> None:
        for hierarchy in _v1_hierarchies():
            top = hierarchy / self.cgroup_root.lstrip("/")
            if not top.is_dir():
                continue
            for directory in sorted(
                (p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True
            ):
                with contextlib.suppress(OSError):
                    directory.rmdir()
            with contextlib.suppress(OSError):
                top.rmdir()
                top.parent.rmdir()  # `/fleetplane`, once no local fleet's node is left in it

    def _start_containerd(self, binaries: dict[str, Path], pause: str, deadline: float) -> None:
        base = self.work_dir / "containerd"
        cni = self.work_dir / "cni"
        (cni / "net.d").mkdir(parents=True, exist_ok=True)
        (cni / "net.d" / "10-fleetplane.conflist").write_text(
            json.dumps(self._cni_config(cni / "ipam"), indent=2)
        )
        base.mkdir(parents=True, exist_ok=True)
        config = base / "config.toml"
        config.write_text(
            CONTAINERD_CONFIG.format(
                root=base / "root",
                state=base / "state",
                socket=self.socket,
                opt=base / "opt",
                pause=pause,
                runc=binaries["runc"],
                runc_root=base / "runc",
                cni_bin=self.bin_dir / "cni",
                cni_conf=cni / "net.d",
                registry=self.registry_address,
            )
        )
        self._spawn("containerd", [str(binaries["containerd"]), f"--config={config}"])
        self._wait(
            "containerd's socket",
            lambda: self._ctr("version", check=False).returncode == 0,
            deadline,
        )

    def _cni_config(self, ipam_dir: Path) -> dict[str, Any]:
        return {
            "cniVersion": "0.4.0",
            "name": "fleetplane",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    # pods keep their addresses towards the host: it routes the pod range
                    # into the node (localfleet.nodenet)
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [
                            [{"subnet": self.network.pod_cidr, "gateway": self.network.pod_gateway}]
                        ],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(ipam_dir),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }

    def _start_kubelet(self, kubelet: Path) -> None:
        client_certificate(
            self.pki, "kubelet", common_name=f"system:node:{self.name}", organization="system:nodes"
        )
        kubeconfig = self.work_dir / "kubelet.kubeconfig"
        kubeconfig.write_text(client_kubeconfig(self.cluster.server, self.pki, "kubelet"))
        config = self.work_dir / "kubelet.yaml"
        config.write_text(json.dumps(self._kubelet_config(), indent=2))
        self._spawn(
            "kubelet",
            [
                str(kubelet),
                f"--config={config}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={self.kubelet_dir}",
                f"--hostname-override={self.name}",
                f"--node-ip={self.network.node_ip}",
                f"--node-labels=fleetplane.dev/pool={SYSTEM_POOL},"
                "fleetplane.dev/capacity-type=on-demand",
                "--v=1",
            ],
        )

    def _kubelet_config(self) -> dict[str, Any]:
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # cgroup v1 (hybrid) and no systemd on these machines (shared/notes/containers.md)
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            # a negative oom_score_adj needs CAP_SYS_RESOURCE, which is not in the bounding set
            "oomScoreAdj": 0,
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "address": self.network.node_ip,
            "port": 10250,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": 10248,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(self.pki / "ca.crt")},
            },
            "authorization": {"mode": "Webhook"},
            "clusterDNS": [self.dns_address],
            "clusterDomain": "cluster.local",
            "resolvConf": "",
            "failSwapOn": False,
            "podLogsDir": str(self.work_dir / "pod-logs"),
            "staticPodPath": "",
            "serializeImagePulls": False,
            "rotateCertificates": False,
            # a shared development disk: evict only when it is really full
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "2%",
                "imagefs.available": "2%",
            },
            "imageGCHighThresholdPercent": 99,
            "imageGCLowThresholdPercent": 98,
        }

    def _start_kube_proxy(self, kube_proxy: Path) -> None:
        client_certificate(
            self.pki, "kube-proxy", common_name="system:kube-proxy", organization=None
        )
        kubeconfig = self.work_dir / "kube-proxy.kubeconfig"
        kubeconfig.write_text(client_kubeconfig(self.cluster.server, self.pki, "kube-proxy"))
        config = self.work_dir / "kube-proxy.yaml"
        config.write_text(
            json.dumps(
                {
                    "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
                    "kind": "KubeProxyConfiguration",
                    "mode": "iptables",
                    "clientConnection": {"kubeconfig": str(kubeconfig)},
                    "hostnameOverride": self.name,
                    "clusterCIDR": self.network.pod_cidr,
                    "healthzBindAddress": "127.0.0.1:10256",
                    "metricsBindAddress": "127.0.0.1:10249",
                    "oomScoreAdj": 0,
                    # conntrack sysctls are the host's (read-only in a namespace): leave them
                    "conntrack": {
                        "maxPerCore": 0,
                        "min": 0,
                        "tcpEstablishedTimeout": "0s",
                        "tcpCloseWaitTimeout": "0s",
                    },
                    # no NodePorts on the node's loopback: it would need route_localnet
                    "iptables": {"localhostNodePorts": False},
                },
                indent=2,
            )
        )
        self._spawn(
            "kube-proxy",
            [str(kube_proxy), f"--config={config}", "--v=1"],
            path_first=self.bin_dir / "iptables",
        )

    # processes -----------------------------------------------------------------------------

    @property
    def _pids(self) -> dict[str, int]:
        if not hasattr(self, "_pid_map"):
            self._pid_map: dict[str, int] = {}
        return self._pid_map

    def _spawn(
        self, name: str, cmd: list[str], *, host: bool = False, path_first: Path | None = None
    ) -> None:
        self.log(f"starting {name}" + ("" if host else f" (in {self.network.namespace})"))
        path = [str(self.bin_dir), os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")]
        if path_first is not None:
            path.insert(0, str(path_first))
        proc = spawn(
            cmd if host else self.network.enter(cmd),
            self.logs_dir / f"{name}.log",
            cwd=self.work_dir,
            env={"PATH": os.pathsep.join(path)},
        )
        self._pids[name] = proc.pid
        self._procs[name] = proc

    @property
    def _procs(self) -> dict[str, subprocess.Popen[bytes]]:
        if not hasattr(self, "_proc_map"):
            self._proc_map: dict[str, subprocess.Popen[bytes]] = {}
        return self._proc_map

    def _wait(self, what: str, ready: Callable[[], bool], deadline: float) -> None:
        self.log(f"waiting for {what}")
        while time.monotonic() < deadline:
            for name, proc in self._procs.items():
                if proc.poll() is not None:
                    raise RealNodeError(
                        f"{name} exited with {proc.returncode} while waiting for {what}:\n"
                        + self.log_tail(name)
                    )
            if ready():
                return
            time.sleep(0.5)
        raise RealNodeError(
            f"timed out waiting for {what}\n"
            + "\n".join(self.log_tail(name) for name in ("containerd", "kubelet", "kube-proxy"))
        )

    def _ready(self) -> bool:
        found = self.cluster.kubectl("get", "node", self.name, "-o", "json", check=False)
        if found.returncode != 0:
            return False
        conditions = json.loads(found.stdout).get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.logs_dir / f"{name}.log"
        if not path.exists():
            path = self.work_dir / "registry" / "registry.log"
            if name != "registry" or not path.exists():
                return f"--- {name}: no log"
        text = path.read_text(errors="replace").splitlines()[-lines:]
        return f"--- {name} ({path}):\n" + "\n".join(text)

    def _write_state(self) -> None:
        state = {
            "pids": dict(self._pids),
            "registry": self.registry_address,
            "network": self.network.slot,
        }
        (self.work_dir / "state.json").write_text(json.dumps(state, indent=2))

    def _read_state(self) -> dict[str, Any]:
        path = self.work_dir / "state.json"
        state: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        state.setdefault("pids", {}).update(self._pids)
        return state

    def running(self) -> bool:
        return any(alive(pid) for pid in self._read_state()["pids"].values())

    def _kill(self, name: str, pid: int | None) -> None:
        if pid is None or not alive(pid):
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        proc = self._procs.get(name)
        if not gone_by(pid, time.monotonic() + 15, proc):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            gone_by(pid, time.monotonic() + 10, proc)

    def _ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self.bin_dir / "ctr"), f"--address={self.socket}", "--namespace=k8s.io", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check and result.returncode != 0:
            raise RealNodeError(f"ctr {' '.join(args)}: {result.stderr.strip()}")
        return result

    def _kill_containers(self) -> list[str]:
        """Kill and delete every task containerd runs (pods' containers and sandboxes), so the
        shims exit with them; the pod network namespaces' paths, to unmount afterwards."""
        if not self.socket.exists() or self._ctr("version", check=False).returncode != 0:
            return []
        netns: list[str] = []
        containers = self._ctr("containers", "list", "--quiet", check=False).stdout.split()
        for container in containers:
            info = self._ctr("containers", "info", container, check=False)
            with contextlib.suppress(ValueError, KeyError, TypeError):
                spec = json.loads(info.stdout)["Spec"]
                for namespace in spec["linux"]["namespaces"]:
                    if namespace.get("type") == "network" and namespace.get("path"):
                        netns.append(namespace["path"])
            self._ctr("tasks", "kill", "--signal=SIGKILL", container, check=False)
        for container in containers:
            for _ in range(20):
                if self._ctr("tasks", "delete", "--force", container, check=False).returncode:
                    listed = self._ctr("tasks", "list", "--quiet", check=False).stdout.split()
                    if container not in listed:
                        break
                    time.sleep(0.25)
                else:
                    break
        return sorted(set(netns))

    @staticmethod
    def _unmount_under(directory: Path) -> None:
        """Lazily unmount every mount at or below `directory`, deepest first (the kubelet's
        volume tmpfs, containerd's rootfs overlays and sandbox shm)."""
        prefix = str(directory.resolve())
        mounts = [
            line.split()[1].encode().decode("unicode_escape")
            for line in Path("/proc/self/mounts").read_text().splitlines()
        ]
        for target in sorted(
            {m for m in mounts if m == prefix or m.startswith(prefix + "/")},
            key=len,
            reverse=True,
        ):
            subprocess.run(["umount", "-l", target], capture_output=True)


def _v1_hierarchies() -> list[Path]:
    """The writable cgroup v1 hierarchies (each controller's mount under /sys/fs/cgroup)."""
    if not CGROUP_ROOT.is_dir():
        return []
    return sorted(
        path
        for path in CGROUP_ROOT.iterdir()
        if path.is_dir() and not path.is_symlink() and path.name != "unified"
    )


CONTAINERD_CONFIG = """\
# containerd for the local fleet's real node (localfleet/realnode.py): everything under the
# node's work directory, so it never meets a system containerd or another local fleet.
version = 2
root = "{root}"
state = "{state}"

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  # the sandbox asks for oom_score_adj -998, which needs CAP_SYS_RESOURCE: clamp it instead
  restrict_oom_score_adj = true
  disable_apparmor = true

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        Root = "{runc_root}"
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{cni_conf}"
    max_conf_num = 1

  # the node's registry is on the host end of its veth, over plain HTTP
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."{registry}"]
    endpoint = ["http://{registry}"]
"""
