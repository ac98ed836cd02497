"""The local stack end to end, offline: the control plane with fake GPU and TPU nodes, a real
`pulumi up` of the `local` stack, the OPA admission gate on loopback, one controller pass and a
summary of the fleet.

    fleetplane up        # the main job (`make up`)
    fleetplane preview   # `pulumi preview --diff` against the running cluster
    fleetplane status    # cluster, gate and stack at a glance
    fleetplane env       # shell exports to run `pulumi` by hand
    fleetplane down      # `pulumi destroy`, then stop everything

`up`, in order:

1. obtains the pinned tools (`tools.bootstrap`), the Pulumi CLI and Kubernetes provider among
   them, and checks that the Python SDKs in the virtual environment match them;
2. starts the local control plane with the fake fleet of the stack file (`localfleet.controlplane`,
   detached), or reuses the running one;
3. runs `pulumi up --yes` on the `local` stack: namespaces, quotas, priority classes, Volcano's
   CRDs and queues, the admission gate (policies, data, serving certificate, webhook) and the
   controller's CronJob (suspended);
4. starts OPA on loopback from the gate's cluster objects, as the in-cluster Deployment would
   mount them: HTTPS at `opa.external_url` for the webhook, plain HTTP at
   `controller.opa_url` for the controller; and an (empty) Prometheus at
   `controller.prometheus_url`;
5. runs one controller pass (`fleetplane controller reconcile`) with the configuration the
   CronJob would mount, and prints the fleet: accelerators per pool, quota and spend per team,
   and the state of the gate.

Pulumi runs offline with everything under `.fleet/`: a local file backend (`.fleet/pulumi`),
`PULUMI_HOME` (`.fleet/pulumi-home`, where the Kubernetes provider is installed from
tools/bin), no update check and no plugin downloads. The stack's secrets (the webhook's TLS
key) use the passphrase provider with the fixed passphrase `LOCAL_PASSPHRASE`: it protects
nothing beyond this machine's throwaway local state, and is documented so anyone can run
`pulumi` on the local stack (`eval "$(fleetplane env)"`).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shlex
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localfleet.controlplane import (
    BIN_DIR,
    ROOT,
    ClusterError,
    LocalCluster,
    _alive,
    format_inventory,
    inventory,
)
from localfleet.processes import spawn

STACK = "local"
REAL_NODE_IMAGES = ("controller", "opa")
LOCAL_PASSPHRASE = "fleetplane-local"
"""Passphrase of the local stack's secrets provider: fixed and public on purpose (see above)."""
STATE_DIR = ROOT / ".fleet"
CONFIG_FILE_COMMANDS = {"up", "preview", "destroy", "refresh"}
"""The `pulumi` commands that take `--config-file`."""
POLICY_KEY_SEPARATOR = "__"
ALERTMANAGER_ADDRESS = "127.0.0.1:9093"
"""Where the local fleet's Alertmanager listens (Prometheus sends the rule set's alerts)."""
"""ConfigMap keys stand for paths: `fleetplane__lib__keys.rego` is `fleetplane/lib/keys.rego`."""


class StackError(RuntimeError):
    """A step of the local stack failed; the message names the step and the cause."""


@dataclass
class Service:
    """A detached loopback server (OPA, Prometheus) whose pid is kept in a file."""

    name: str
    work_dir: Path

    @property
    def pid_file(self) -> Path:
        return self.work_dir / "pid"

    @property
    def log_file(self) -> Path:
        return self.work_dir / f"{self.name}.log"

    def pid(self) -> int | None:
        if not self.pid_file.exists():
            return None
        pid = int(self.pid_file.read_text().strip())
        return pid if _alive(pid) else None

    def start(
        self,
        cmd: list[str],
        ready: Callable[[], bool],
        timeout: float = 60.0,
        env: dict[str, str] | None = None,
    ) -> None:
        self.stop()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        proc = spawn(cmd, self.log_file, cwd=self.work_dir, env=env)
        self.pid_file.write_text(f"{proc.pid}\n")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise StackError(f"{self.name} exited with {proc.returncode}:\n{self.log_tail()}")
            if ready():
                return
            time.sleep(0.2)
        raise StackError(f"{self.name} not ready after {timeout:.0f}s:\n{self.log_tail()}")

    def stop(self) -> None:
        pid = self.pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.1)
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
        self.pid_file.unlink(missing_ok=True)

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_file.exists():
            return f"--- {self.name}: no log"
        text = self.log_file.read_text(errors="replace").splitlines()[-lines:]
        return f"--- {self.name} ({self.log_file}):\n" + "\n".join(text)


def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def _host_port(url: str) -> tuple[str, int]:
    parsed = urllib.parse.urlsplit(url)
    if parsed.hostname is None or parsed.port is None:
        raise StackError(f"{url}: expected scheme://HOST:PORT")
    return parsed.hostname, parsed.port


def _loopback(url: str) -> bool:
    return urllib.parse.urlsplit(url).hostname in {"127.0.0.1", "localhost", "::1"}


@dataclass
class LocalStack:
    """The `local` stack and the loopback parts around it.

    state_dir: where the cluster (`local/`), the Pulumi backend (`pulumi/`), PULUMI_HOME
    (`pulumi-home/`) and the loopback services (`services/`) live. config_file: the stack
    configuration to use instead of `stacks/Pulumi.local.yaml` (passed as `--config-file`);
    its `fleetplane:kubeconfig` must name `<state_dir>/local/kubeconfig`.
    """

    state_dir: Path = STATE_DIR
    config_file: Path | None = None
    stack: str = STACK
    passphrase: str = LOCAL_PASSPHRASE
    bin_dir: Path = BIN_DIR
    root: Path = ROOT
    log: Callable[[str], None] = field(default=lambda message: None)
    real_node: bool = False
    """Start a real node beside the fake ones (localfleet.realnode) and run the gate and the
    controller in the cluster, from the images in `images_dir` (`fleetplane image build`)."""
    images_dir: Path = STATE_DIR / "images"
    alert_webhook: str | None = None
    """Where the local Alertmanager posts the rule set's alerts (an Alertmanager webhook
    receiver's URL, with a 5 s group wait); None: the alerts are only shown by Alertmanager."""

    # paths -----------------------------------------------------------------------------------

    @property
    def python(self) -> Path:
        """The virtual environment's interpreter (the one running this, under `make`)."""
        venv = self.root / ".venv" / "bin" / "python"
        return venv if venv.exists() else Path(sys.executable)

    @property
    def cluster_dir(self) -> Path:
        return self.state_dir / "local"

    @property
    def backend_dir(self) -> Path:
        return self.state_dir / "pulumi"

    @property
    def pulumi_home(self) -> Path:
        return self.state_dir / "pulumi-home"

    @property
    def services_dir(self) -> Path:
        return self.state_dir / "services"

    @property
    def stack_file(self) -> Path:
        return self.config_file or self.root / "stacks" / f"Pulumi.{self.stack}.yaml"

    @property
    def real_node_config(self) -> Path:
        """The stack configuration `up --real-node` derives from `stack_file` (see
        `configure_real_node`); it exists while the cluster with the real node does."""
        return self.cluster_dir / f"Pulumi.{self.stack}.real-node.yaml"

    @property
    def effective_config(self) -> Path | None:
        """The configuration file `pulumi` and the summary use."""
        return self.real_node_config if self.real_node_config.exists() else self.config_file

    @property
    def network_record(self) -> Path:
        return self.cluster_dir / "network.json"

    def node(self) -> Any:
        """The real node of the running cluster, or None."""
        from localfleet.nodenet import NodeNetwork
        from localfleet.realnode import RealNode

        network = NodeNetwork.recorded(self.network_record)
        if network is None:
            return None
        return RealNode(self.cluster, network, self.cluster_dir / "node", log=self.log)

    @property
    def cluster(self) -> LocalCluster:
        cluster = LocalCluster(
            data_dir=self.cluster_dir, bin_dir=self.bin_dir, keep=True, detach=True, log=self.log
        )
        cluster.running_pids()  # reads where it listens (its ports, its bind address)
        return cluster

    @property
    def opa(self) -> Service:
        return Service("opa", self.services_dir / "opa")

    @property
    def prometheus(self) -> Service:
        return Service("prometheus", self.services_dir / "prometheus")

    @property
    def admission_keeper(self) -> Service:
        return Service("admission-keeper", self.services_dir / "admission-keeper")

    @property
    def pushgateway(self) -> Service:
        return Service("pushgateway", self.services_dir / "pushgateway")

    @property
    def alertmanager(self) -> Service:
        return Service("alertmanager", self.services_dir / "alertmanager")

    @property
    def dcgm_exporter(self) -> Service:
        return Service("dcgm-exporter", self.services_dir / "dcgm-exporter")

    @property
    def volcano(self) -> Any:
        from localfleet.volcano import LocalVolcano

        return LocalVolcano(
            cluster=self.cluster, fleet=self.fleet(), bin_dir=self.bin_dir, log=self.log
        )

    def fleet(self) -> Any:
        from fleet.config import load_stack_config

        return load_stack_config(self.effective_config or self.stack_file)

    # pulumi ----------------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """The environment `pulumi` runs with: offline, local state, fixed passphrase."""
        return {
            "PULUMI_HOME": str(self.pulumi_home),
            "PULUMI_BACKEND_URL": f"file://{self.backend_dir}",
            "PULUMI_CONFIG_PASSPHRASE": self.passphrase,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            # Plugins come from PULUMI_HOME (exact versions) or beside `pulumi`, never from PATH.
            "PULUMI_IGNORE_AMBIENT_PLUGINS": "true",
            "PULUMI_SKIP_CONFIRMATIONS": "true",
            # The program and the provider of dynamic resources run with this interpreter
            # (Pulumi.yaml names no virtualenv, see there).
            "PULUMI_PYTHON_CMD": str(self.python),
            "PATH": os.pathsep.join(
                [str(self.bin_dir), str(self.python.parent), os.environ.get("PATH", "")]
            ),
        }

    def pulumi(
        self, *args: str, capture: bool = False, check: bool = True, stack: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run the pinned `pulumi` in the project directory; with `stack`, on this stack (and
        its configuration file, for the commands that run the program)."""
        cmd = [str(self.bin_dir / "pulumi"), *args, "--non-interactive"]
        if stack:
            cmd += ["--stack", self.stack]
        config = self.effective_config
        if config is not None and args and args[0] in CONFIG_FILE_COMMANDS:
            cmd += ["--config-file", str(config)]
        if not capture:
            self.log("$ " + shlex.join(["pulumi", *cmd[1:]]))
        result = subprocess.run(
            cmd,
            cwd=self.root,
            env={**os.environ, **self.env()},
            capture_output=capture,
            text=True,
        )
        if check and result.returncode != 0:
            detail = f":\n{result.stdout}\n{result.stderr}" if capture else ""
            raise StackError(f"`pulumi {' '.join(args)}` exited {result.returncode}{detail}")
        return result

    # The bootstrap (tools/) is run as a process of the checkout, never imported: nothing of the
    # product depends on how upstream binaries are obtained.
    def ensure_tools(self) -> None:
        result = subprocess.run([sys.executable, "-m", "tools.bootstrap"], cwd=self.root)
        if result.returncode != 0:
            raise StackError("the pinned tools could not be obtained (see the bootstrap's output)")

    def pinned_versions(self) -> dict[str, str]:
        """Tool name -> pinned version, as `python -m tools.bootstrap --list` prints them."""
        result = subprocess.run(
            [sys.executable, "-m", "tools.bootstrap", "--list"],
            cwd=self.root,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise StackError(f"cannot list the pinned tools: {result.stderr.strip()}")
        return {
            fields[0]: fields[1]
            for fields in (line.split() for line in result.stdout.splitlines())
            if len(fields) >= 2
        }

    def check_sdks(self) -> None:
        """The Python SDKs must be the versions of the CLI and the provider: the SDK asks the
        engine for the provider at its own version."""
        tools = {name: version.lstrip("v") for name, version in self.pinned_versions().items()}
        wanted = {
            "pulumi": tools["pulumi"],
            "pulumi-kubernetes": tools["pulumi-resource-kubernetes"],
        }
        for package, version in wanted.items():
            try:
                installed = importlib.metadata.version(package)
            except importlib.metadata.PackageNotFoundError:
                installed = "none"
            if installed != version:
                raise StackError(
                    f"the virtual environment has {package} {installed}, the pinned tools are "
                    f"for {version}: run `make venv` (pip install -e '.[dev]')"
                )

    def ensure_provider(self) -> None:
        """Install the Kubernetes provider from tools/bin into PULUMI_HOME, offline."""
        version = self.pinned_versions()["pulumi-resource-kubernetes"]
        binary = (self.bin_dir / "pulumi-resource-kubernetes").resolve()
        installed = (
            self.pulumi_home
            / "plugins"
            / f"resource-kubernetes-{version}"
            / "pulumi-resource-kubernetes"
        )
        if installed.exists() and _digest(installed) == _digest(binary):
            return
        self.pulumi(
            "plugin",
            "install",
            "resource",
            "kubernetes",
            version,
            "--file",
            str(binary),
            "--reinstall",
            stack=False,
        )

    def ensure_stack(self) -> None:
        self.backend_dir.mkdir(parents=True, exist_ok=True)
        listed = self.pulumi("stack", "ls", "--json", capture=True, stack=False)
        names = {entry["name"].rsplit("/", 1)[-1] for entry in json.loads(listed.stdout or "[]")}
        if self.stack not in names:
            self.pulumi(
                "stack", "init", self.stack, "--secrets-provider", "passphrase", stack=False
            )

    def resource_count(self) -> int:
        exported = self.pulumi("stack", "export", capture=True)
        deployment = json.loads(exported.stdout).get("deployment", {})
        return len(deployment.get("resources") or [])

    # the cluster -----------------------------------------------------------------------------

    def check_kubeconfig(self) -> None:
        from fleet.config import KUBECONFIG_CONFIG_KEY, read_stack_file

        configured = read_stack_file(self.stack_file).get(KUBECONFIG_CONFIG_KEY)
        expected = self.cluster_dir / "kubeconfig"
        path = Path(str(configured or "")).expanduser()
        if not path.is_absolute():
            path = self.root / path
        if path.resolve() != expected.resolve():
            raise StackError(
                f"{self.stack_file}: {KUBECONFIG_CONFIG_KEY} is {configured!r}; the local "
                f"cluster writes its kubeconfig to {expected}"
            )

    def start_cluster(self) -> bool:
        """Start the control plane with the stack's fake fleet; False when it already runs."""
        from localfleet.fakenodes import fake_nodes, local_fake_pools

        cluster = self.cluster
        if cluster.running_pids():
            if self.real_node and self.node() is None:
                raise StackError(
                    "the local control plane runs without a real node: `fleetplane down` first"
                )
            self.log(f"local control plane already running ({cluster.kubeconfig})")
            return False
        if self.cluster_dir.exists():
            self._stop_cluster()
        started = time.monotonic()
        if not self.real_node:
            cluster.start()
            cluster.create_nodes(fake_nodes(local_fake_pools(self.fleet())))
            self.log(f"control plane and fake fleet up in {time.monotonic() - started:.1f}s")
            return True
        from localfleet.nodenet import NodeNetwork

        self._require_images()
        network = NodeNetwork.create(self.network_record)
        cluster.bind_address, cluster.service_cidr = network.host_ip, network.service_cidr
        try:
            cluster.start()
            cluster.create_nodes(fake_nodes(local_fake_pools(self.fleet())))
            node = self.node()
            node.start()
            self.configure_real_node(node)
        except BaseException:
            self._stop_cluster()
            raise
        self.log(
            f"control plane, fake fleet and real node {node.name} up in "
            f"{time.monotonic() - started:.1f}s"
        )
        return True

    # the real node ---------------------------------------------------------------------------

    def _require_images(self) -> None:
        missing = [n for n in REAL_NODE_IMAGES if not (self.images_dir / n / "index.json").exists()]
        if missing:
            raise StackError(
                f"no {' or '.join(missing)} image in {self.images_dir}: the real node runs the "
                "images `fleetplane image build` writes there (make image)"
            )

    def configure_real_node(self, node: Any) -> None:
        """Push the built images to the node's registry and derive the stack configuration
        that runs them there: OPA as its Deployment behind its Service (no `external_url`), the
        controller's CronJob with its image (still suspended: its Jobs are started on purpose)
        talking to that Service, and Prometheus and the Pushgateway on the host end of the
        node's veth, where pods reach them."""
        import yaml

        from images.push import push
        from localfleet.controlplane import free_port

        refs = {
            name: push(self.images_dir / name, node.registry_address, f"fleetplane/{name}")
            for name in REAL_NODE_IMAGES
        }
        for name, ref in refs.items():
            self.log(f"{name} image pushed to the node's registry: {ref}")
        config = yaml.safe_load(self.stack_file.read_text())
        fleet = config["config"]["fleetplane:fleet"]
        opa = {k: v for k, v in fleet.get("opa", {}).items() if k != "external_url"}
        fleet["opa"] = {**opa, "deploy": True, "image": refs["opa"]}
        controller = {k: v for k, v in fleet.get("controller", {}).items() if k != "opa_url"}
        prometheus = f"http://{node.network.host_ip}:{free_port()}"
        fleet["controller"] = {
            **controller,
            "image": refs["controller"],
            "prometheus_url": prometheus,
        }
        gateway = fleet.setdefault("observability", {}).setdefault("pushgateway", {})
        if gateway.get("deploy") is False:  # the local fleet runs it: where pods reach it
            gateway["url"] = f"http://{node.network.host_ip}:{free_port()}"
        header = (
            f"# Derived from {self.stack_file} by `fleetplane up --real-node` "
            "(localfleet/stack.py); removed with the cluster.\n"
        )
        self.real_node_config.write_text(header + yaml.safe_dump(config, sort_keys=False))

    def _served_here(self, url: str) -> bool:
        """Whether the local fleet serves `url` itself: on loopback, or on the host's end of
        the real node's veth (where its pods reach the host)."""
        node = self.node()
        return _loopback(url) or (node is not None and _host_port(url)[0] == node.network.host_ip)

    def wait_for_gate(self, timeout: float = 600.0) -> None:
        """OPA's Deployment has every replica ready (on the real node)."""
        fleet = self.fleet()
        ns, name = fleet.system_namespace, fleet.opa.name
        deadline = time.monotonic() + timeout
        self.log(f"waiting for OPA's {fleet.opa.replicas} replicas (image pull, start)")
        while True:
            found = self.cluster.kubectl("get", "deployment", name, "-n", ns, "-o", "json",
                                         check=False)  # fmt: skip
            status = json.loads(found.stdout).get("status", {}) if found.returncode == 0 else {}
            if status.get("readyReplicas", 0) >= fleet.opa.replicas:
                break
            if time.monotonic() > deadline:
                pods = self.cluster.kubectl("get", "pods", "-n", ns, "-o", "wide", check=False)
                events = self.cluster.kubectl("get", "events", "-n", ns, check=False)
                raise StackError(
                    f"OPA's Deployment not ready after {timeout:.0f}s:\n{pods.stdout}"
                    f"{events.stdout[-3000:]}"
                )
            time.sleep(2)
        self.log(f"OPA ({fleet.opa.replicas} replicas) serving the gate from the real node")

    def controller_job(self, name: str, timeout: float = 600.0) -> tuple[int, str]:
        """One controller pass in the cluster: a Job created from the CronJob, as the schedule
        would create it; its exit status (0 complete, 1 failed) and its log."""
        from components.controller_job import CONTROLLER_NAME

        ns = self.fleet().system_namespace
        cluster = self.cluster
        cluster.kubectl("create", "job", name, f"--from=cronjob/{CONTROLLER_NAME}", "-n", ns)
        deadline = time.monotonic() + timeout
        while True:
            status = cluster.get_json("job", name, "-n", ns).get("status", {})
            done = {c["type"]: c["status"] for c in status.get("conditions", [])}
            if done.get("Complete") == "True" or done.get("Failed") == "True":
                break
            if time.monotonic() > deadline:
                raise StackError(f"controller Job {name} not finished after {timeout:.0f}s")
            time.sleep(1)
        logs = cluster.kubectl("logs", f"job/{name}", "-n", ns, check=False).stdout
        return (0 if done.get("Complete") == "True" else 1), logs

    def _stop_cluster(self, *, keep: bool = False) -> None:
        from localfleet.nodenet import NodeNetwork

        node = self.node()
        if node is not None:
            node.stop()
        cluster = self.cluster
        cluster.keep = keep
        network = NodeNetwork.recorded(self.network_record)
        cluster.stop()
        if network is not None:
            network.destroy()
            self.network_record.unlink(missing_ok=True)

    # the gate, Prometheus and the controller -------------------------------------------------

    def start_gate(self) -> None:
        """OPA on loopback, loaded from the gate's cluster objects: HTTPS at opa.external_url
        (the webhook), plain HTTP at controller.opa_url (the controller). As in a cluster, it
        requires a bearer token (the controller's) for anything but admission decisions and
        health, and loads the authz document from the gate's Secret."""
        fleet = self.fleet()
        if fleet.opa.external_url is None:
            self.log("no admission gate outside the cluster in this stack (opa.external_url)")
            return
        cluster, ns, name = self.cluster, fleet.system_namespace, fleet.opa.name
        policies = cluster.get_json("configmap", f"{name}-policies", "-n", ns).get("data", {})
        data = cluster.get_json("configmap", f"{name}-data", "-n", ns).get("data", {})
        secret = cluster.get_json("secret", f"{name}-tls", "-n", ns).get("data", {})
        from fleet.render import opa_authz_secret

        authz = cluster.get_json("secret", opa_authz_secret(fleet), "-n", ns).get("data", {})
        work = self.opa.work_dir
        for sub in ("policies", "data", "certs", "authz", "controller-data"):
            target = work / sub
            if target.exists():
                for path in sorted(target.rglob("*"), reverse=True):
                    path.unlink() if path.is_file() else path.rmdir()
            target.mkdir(parents=True, exist_ok=True)
        for key, text in policies.items():
            path = work / "policies" / key.replace(POLICY_KEY_SEPARATOR, "/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        (work / "data" / "data.json").write_text(data["config.json"])
        from fleet.opa import AUTHZ_DATA_PATH, OPA_AUTH_FLAGS

        authz_file = work / "authz" / AUTHZ_DATA_PATH
        authz_file.parent.mkdir(parents=True, exist_ok=True)
        authz_file.write_bytes(base64.b64decode(authz["data.json"]))
        # The last spend the controller published (its ConfigMap, once a pass has written it),
        # as the Deployment mounts it: a restarted OPA keeps refusing a team over budget.
        for relative, content in self._controller_data(fleet).items():
            target = work / "controller-data" / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        for key in ("tls.crt", "tls.key", "ca.crt"):
            path = work / "certs" / key
            path.write_bytes(base64.b64decode(secret[key]))
            path.chmod(0o600)
        from fleet.opa import OPA_GC_ENV, OPA_RUN_FLAGS

        host, port = _host_port(fleet.opa.external_url)
        addrs = [f"--addr=https://{host}:{port}"]
        plain = fleet.controller.opa_url
        if plain and plain.startswith("http://") and _loopback(plain):
            addrs.append("--addr=http://{}:{}".format(*_host_port(plain)))
        context = ssl.create_default_context(cafile=str(work / "certs" / "ca.crt"))
        self.opa.start(
            [
                str(self.bin_dir / "opa"),
                "run",
                "--server",
                *addrs,
                f"--tls-cert-file={work / 'certs' / 'tls.crt'}",
                f"--tls-private-key-file={work / 'certs' / 'tls.key'}",
                "--log-level=error",
                "--disable-telemetry",
                *OPA_RUN_FLAGS,
                *OPA_AUTH_FLAGS,
                "--ignore=.*",
                str(work / "policies"),
                str(work / "data"),
                str(work / "authz"),
                str(work / "controller-data"),
            ],
            ready=lambda: _http_ok(f"https://{host}:{port}/health", context),
            env=OPA_GC_ENV,  # the GC settings the in-cluster Deployment gives OPA
        )
        self.log(f"OPA serving the gate at {fleet.opa.external_url} ({len(policies)} policies)")

    def _controller_data(self, fleet: Any) -> dict[str, str]:
        """The files OPA loads from the controller's ConfigMap; none before its first pass."""
        from fleet.opa import controller_data_files
        from fleet.render import opa_data_configmap

        kept = opa_data_configmap(fleet)
        if kept is None:
            return {}
        namespace, _, name = kept.partition("/")
        found = self.cluster.kubectl(
            "get", "configmap", name, "-n", namespace, "-o", "json", check=False
        )
        if found.returncode != 0 and "NotFound" in (found.stderr or ""):
            return {}
        if found.returncode != 0:
            raise StackError(f"cannot read ConfigMap {kept}: {found.stderr.strip()}")
        return controller_data_files(json.loads(found.stdout).get("data") or {})

    def start_volcano(self) -> None:
        """The pinned Volcano release (CRDs, webhooks, controllers, scheduler), configured as
        the cloud stacks' chart is; started again if it is not running."""
        volcano = self.volcano
        if volcano.running_pids().keys() >= {
            "vc-scheduler",
            "vc-controller-manager",
            "vc-webhook-manager",
        }:
            return
        volcano.stop()
        started = time.monotonic()
        volcano.start()
        self.log(
            f"Volcano {self.fleet().volcano.chart_version} up in {time.monotonic() - started:.1f}s"
        )

    def exporter_address(self) -> str | None:
        port_file = self.dcgm_exporter.work_dir / "port"
        if self.dcgm_exporter.pid() is None or not port_file.exists():
            return None
        return f"127.0.0.1:{port_file.read_text().strip()}"

    def start_dcgm_exporter(self) -> str:
        """The dcgm-exporter stand-in for the fake GPU nodes (`localfleet.dcgm_exporter`)."""
        from localfleet.controlplane import free_port

        running = self.exporter_address()
        if running is not None:
            return running
        port = free_port()
        work = self.dcgm_exporter.work_dir
        work.mkdir(parents=True, exist_ok=True)
        (work / "port").write_text(f"{port}\n")
        self.dcgm_exporter.start(
            [
                str(self.python),
                "-m",
                "localfleet.dcgm_exporter",
                "--kubeconfig",
                str(self.cluster.kubeconfig),
                "--port",
                str(port),
            ],
            ready=lambda: _http_ok(f"http://127.0.0.1:{port}/health"),
            env={"PYTHONPATH": str(self.root)},
        )
        self.log(f"DCGM exporter stand-in at http://127.0.0.1:{port}/metrics")
        return f"127.0.0.1:{port}"

    def start_prometheus(self) -> None:
        """Prometheus at `controller.prometheus_url`, evaluating the rule set
        (observability/rules.yaml, the stack's numbers) and scraping the Pushgateway the
        controller pushes to; alerts go to a local Alertmanager (ALERTMANAGER_ADDRESS, no
        receiver: see them with `amtool` or its UI). With a real node, Prometheus listens on the
        host's end of the node's veth, where pods reach it."""
        from components.gpu_operator import dcgm_service_monitor
        from fleet.render import pushgateway_url
        from localfleet.dcgm_exporter import scrape_config
        from localfleet.servers import alertmanager_config, prometheus_config
        from observability.rules import write_rule_file

        fleet = self.fleet()
        url = fleet.controller.prometheus_url
        if not self._served_here(url):
            return
        gateway = pushgateway_url(fleet)
        pushgateway: str | None = None
        if self._served_here(gateway):
            pushgateway = "{}:{}".format(*_host_port(gateway))
            self.pushgateway.start(
                [
                    str(self.bin_dir / "pushgateway"),
                    f"--web.listen-address={pushgateway}",
                    "--log.level=warn",
                ],
                ready=lambda: _http_ok(f"{gateway}/-/ready"),
            )
            self.log(f"Pushgateway at {gateway}")
        from localfleet.servers import debian_template_launcher

        work = self.alertmanager.work_dir
        (work / "data").mkdir(parents=True, exist_ok=True)
        (work / "alertmanager.yml").write_text(
            alertmanager_config(self.alert_webhook, wait_seconds=5)
            if self.alert_webhook
            else alertmanager_config(None)
        )
        self.alertmanager.start(
            [
                *debian_template_launcher(self.bin_dir / "alertmanager"),
                str(self.bin_dir / "alertmanager"),
                f"--config.file={work / 'alertmanager.yml'}",
                f"--storage.path={work / 'data'}",
                f"--web.listen-address={ALERTMANAGER_ADDRESS}",
                "--cluster.listen-address=",
                "--log.level=warn",
            ],
            ready=lambda: _http_ok(f"http://{ALERTMANAGER_ADDRESS}/-/ready"),
        )
        self.log(f"Alertmanager at http://{ALERTMANAGER_ADDRESS}")
        address = self.start_dcgm_exporter()
        gpu_nodes = sorted(
            node["metadata"]["name"]
            for node in self.cluster.get_json("nodes")["items"]
            if int(node.get("status", {}).get("allocatable", {}).get("nvidia.com/gpu", 0) or 0)
        )
        host, port = _host_port(url)
        work = self.prometheus.work_dir
        (work / "data").mkdir(parents=True, exist_ok=True)
        rules = write_rule_file(fleet, work / "rules.yaml")
        (work / "prometheus.yml").write_text(
            prometheus_config(
                rule_files=(rules,),
                pushgateway=pushgateway,
                alertmanager=ALERTMANAGER_ADDRESS,
                scrape_configs=[scrape_config(dcgm_service_monitor(fleet), address, gpu_nodes)],
            )
        )
        self.prometheus.start(
            [
                str(self.bin_dir / "prometheus"),
                f"--config.file={work / 'prometheus.yml'}",
                f"--storage.tsdb.path={work / 'data'}",
                f"--web.listen-address={host}:{port}",
                "--log.level=warn",
            ],
            ready=lambda: _http_ok(f"{url}/-/ready"),
        )
        self.log(f"Prometheus at {url} (rules: {rules})")

    def report(self, out: Path | None = None) -> int:
        """`fleetplane report` for the current month on the local Prometheus (after the main
        job: its controller pass has pushed the month's first metrics); the exit status."""
        from observability.cli import write_month_report

        fleet = self.fleet()
        return write_month_report(
            fleet.controller.prometheus_url, fleet, None, out or self.services_dir / "reports"
        )

    def month_report(self) -> str:
        """After the scenario: the month's chargeback from the local Prometheus, and where it
        is. A report that cannot be written is said, not raised: it must not undo the job."""
        out = self.services_dir / "reports"
        try:
            status = self.report(out)
        except Exception as error:
            self.log(f"chargeback report not written: {error}")
            return f"\nchargeback report: not written ({error})\n"
        said = "written" if status == 0 else f"incomplete (exit {status})"
        return f"\nchargeback report for this month, {said}: {out} (fleetplane report)\n"

    def controller_config(self) -> Path:
        """The rendered configuration the CronJob mounts, read from its ConfigMap."""
        from fleet.render import CONFIG_FILE, CONTROLLER_NAME

        fleet = self.fleet()
        configmap = self.cluster.get_json(
            "configmap", f"{CONTROLLER_NAME}-config", "-n", fleet.system_namespace
        )
        path = self.services_dir / "controller" / CONFIG_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(configmap["data"][CONFIG_FILE])
        return path

    def controller_kubeconfig(self) -> Path:
        """A kubeconfig whose client certificate names the CronJob's ServiceAccount, so the
        admission gate sees the controller's writes as the platform's (as in a cluster). It
        also carries system:masters: on the host the pass is not confined to the CronJob's
        RBAC (the RBAC tests impersonate the ServiceAccount)."""
        from components.controller_job import CONTROLLER_NAME
        from fleet.render import service_account
        from localfleet.pki import client_certificate, client_kubeconfig

        path = self.services_dir / "controller" / "kubeconfig"
        pki = self.cluster_dir / "pki"
        admin = json.loads((self.cluster_dir / "kubeconfig").read_text())
        client_certificate(
            pki,
            "controller",
            common_name=service_account(self.fleet().system_namespace, CONTROLLER_NAME),
            organization="system:masters",
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            client_kubeconfig(admin["clusters"][0]["cluster"]["server"], pki, "controller")
        )
        return path

    def controller_token(self) -> Path:
        """The controller's bearer token for OPA, read from the gate's Secret (as the CronJob
        mounts it) into a file only this user can read."""
        from fleet.opa import CONTROLLER_TOKEN_KEY
        from fleet.render import opa_controller_token_secret

        fleet = self.fleet()
        secret = self.cluster.get_json(
            "secret", opa_controller_token_secret(fleet), "-n", fleet.system_namespace
        )
        path = self.services_dir / "controller" / "opa-token"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600, exist_ok=True)
        path.chmod(0o600)
        path.write_bytes(base64.b64decode(secret["data"][CONTROLLER_TOKEN_KEY]))
        return path

    def _controller_command(self, *command: str) -> list[str]:
        """`fleetplane controller <command>` with what the CronJob's pod mounts: the rendered
        configuration, credentials, the gate's OPA and its token, Prometheus."""
        fleet = self.fleet()
        cmd = [
            sys.executable,
            "-m",
            "fleetplane",
            "controller",
            *command,
            "--config",
            str(self.controller_config()),
            "--kubeconfig",
            str(self.controller_kubeconfig()),
        ]
        if fleet.controller.opa_url:
            cmd += ["--opa-url", fleet.controller.opa_url]
        if fleet.opa.gate:
            cmd += ["--opa-token-file", str(self.controller_token())]
        return [*cmd, "--prometheus-url", fleet.controller.prometheus_url]

    def start_admission_keeper(self) -> None:
        """`fleetplane controller admission --watch` on the host, as its Deployment runs it in a
        cluster: reservations written as pods are created (controller/admission_keeper.py);
        ready at its first pass. `fleetplane down` stops it."""
        cmd = self._controller_command("admission", "--watch")
        self.log("$ " + shlex.join(["fleetplane", *cmd[3:]]) + " &")
        keeper = self.admission_keeper
        keeper.start(
            cmd,
            lambda: keeper.log_file.exists() and '"keeper.pass"' in keeper.log_file.read_text(),
            env={**os.environ, "PYTHONPATH": str(self.root)},
        )

    def controller_pass(self) -> int | None:
        """One real `fleetplane controller reconcile` pass, as the CronJob runs it."""
        cmd = self._controller_command("reconcile")
        self.log("$ " + shlex.join(["fleetplane", *cmd[3:]]))
        log_path = self.services_dir / "controller" / "reconcile.log"
        with open(log_path, "w") as log:
            result = subprocess.run(
                cmd, cwd=self.root, stdout=log, stderr=subprocess.STDOUT, timeout=600
            )
        text = log_path.read_text(errors="replace")
        for line in text.splitlines()[-15:]:
            self.log(f"  {line}")
        from localfleet.scenario import controller_actions

        with open(self.services_dir / "controller" / "actions.jsonl", "a") as actions:
            for decision in controller_actions(text):
                actions.write(json.dumps(decision.__dict__) + "\n")
        return result.returncode

    # summary ---------------------------------------------------------------------------------

    def summary(self, controller_exit: int | None = None) -> str:
        fleet = self.fleet()
        cluster = self.cluster
        lines = [format_inventory(inventory(cluster.get_json("nodes")["items"])), ""]
        queues = {
            q["metadata"]["name"]: q
            for q in cluster.get_json("queues.scheduling.volcano.sh")["items"]
        }
        spend = self._spend(fleet)
        lines.append(
            f"{'TEAM':12} {'NAMESPACES':24} {'QUEUE (allocated/capability)':36} {'SPEND (month)'}"
        )
        for team in fleet.teams:
            namespaces = team.effective_namespaces
            queue = queues.get(team.name, {})
            allocated = queue.get("status", {}).get("allocated", {}) or {}
            capability = queue.get("spec", {}).get("capability", {}) or {}
            used = [
                f"{resource} {allocated.get(resource, '0')}/{hard}"
                for resource, hard in sorted(capability.items())
                if str(hard) != "0"
            ]
            spent = spend.get(team.name, {}).get("usd")
            money = (
                f"${spent:,.2f} of ${team.monthly_budget_usd:,.0f}"
                if isinstance(spent, int | float)
                else f"- of ${team.monthly_budget_usd:,.0f}"
            )
            lines.append(
                f"{team.name:12} {','.join(namespaces):24} {', '.join(used) or '-':36} {money}"
            )
        lines += ["", self._gate_status(fleet)]
        running = self.volcano.running_pids()
        lines.append(
            f"volcano {fleet.volcano.chart_version}: "
            + (", ".join(f"{name} ({pid})" for name, pid in running.items()) or "not running")
        )
        exporter = self.exporter_address()
        lines.append(
            f"dcgm-exporter stand-in: {'http://' + exporter + '/metrics' if exporter else 'not running'}"
            f", scraped by Prometheus at {fleet.controller.prometheus_url}"
        )
        for cluster_config in fleet.clusters:
            if not cluster_config.helm_charts:
                lines.append(
                    f"helm charts: off in cluster {cluster_config.name!r} (offline): the GPU "
                    "Operator is not installed (fake nodes carry its labels); Volcano runs as "
                    "local processes of the same release"
                )
        if controller_exit is not None:
            state = "ok" if controller_exit == 0 else f"failed (exit {controller_exit})"
            lines.append(f"controller: one reconcile pass {state}")
        keeper = self.admission_keeper.pid()
        lines.append(
            f"admission keeper: {'running (' + str(keeper) + ')' if keeper else 'not running'}"
            f" (reservations as pods are created; log {self.admission_keeper.log_file})"
        )
        lines += [
            "",
            f"export KUBECONFIG={self.cluster_dir / 'kubeconfig'}",
            'eval "$(fleetplane env)"   # then: pulumi preview --diff --stack ' + self.stack,
        ]
        return "\n".join(lines)

    def _spend(self, fleet: Any) -> dict[str, Any]:
        url = fleet.controller.opa_url
        if not url or self.opa.pid() is None:
            return {}
        try:
            # OPA answers data reads only to the controller's token (policies/system/authz.rego)
            token = self.controller_token().read_text().strip()
            request = urllib.request.Request(
                f"{url}/v1/data/fleetplane/spend", headers={"Authorization": f"Bearer {token}"}
            )
            with urllib.request.urlopen(request, timeout=5) as answer:
                result = json.loads(answer.read()).get("result")
        except (urllib.error.URLError, OSError, ValueError, KeyError, ClusterError):
            return {}
        return result if isinstance(result, dict) else {}

    def _gate_status(self, fleet: Any) -> str:
        found = self.cluster.kubectl(
            "get", "validatingwebhookconfiguration", fleet.opa.name, "-o", "json", check=False
        )
        if found.returncode != 0:
            return "policy gate: no webhook declared"
        (hook,) = json.loads(found.stdout)["webhooks"]
        target = hook["clientConfig"].get("url") or "the in-cluster OPA Service"
        state = "OPA not running"
        if fleet.opa.deploy and fleet.opa.external_url is None:
            found = self.cluster.kubectl(
                "get", "deployment", fleet.opa.name, "-n", fleet.system_namespace, "-o", "json",
                check=False,
            )  # fmt: skip
            if found.returncode == 0:
                ready = json.loads(found.stdout).get("status", {}).get("readyReplicas", 0)
                state = f"OPA {ready}/{fleet.opa.replicas} replicas ready in the cluster"
        elif fleet.opa.external_url is not None and self.opa.pid() is not None:
            host, port = _host_port(fleet.opa.external_url)
            context = ssl.create_default_context(cafile=str(self.opa.work_dir / "certs/ca.crt"))
            if _http_ok(f"https://{host}:{port}/health", context):
                state = "OPA healthy"
        return (
            f"policy gate: enforcing on namespaces labelled fleetplane.dev/team, webhook -> "
            f"{target} (failurePolicy {hook['failurePolicy']}), {state}"
        )

    # commands --------------------------------------------------------------------------------

    def live(self) -> str:
        """Queues, pending workloads and why they wait, recent controller actions."""
        from localfleet.scenario import pending_reason

        fleet = self.fleet()
        cluster = self.cluster
        queues = cluster.get_json("queues.scheduling.volcano.sh")["items"]
        total_weight = sum(q.get("spec", {}).get("weight", 1) for q in queues) or 1
        lines = [
            "",
            f"{'QUEUE':12} {'STATE':8} {'ALLOCATED':28} {'DESERVED':18} CAPABILITY",
        ]
        for queue in sorted(queues, key=lambda q: q["metadata"]["name"]):
            spec, status = queue.get("spec", {}), queue.get("status", {})
            allocated = {
                k: v
                for k, v in (status.get("allocated") or {}).items()
                if k.startswith(("nvidia", "google"))
            }
            # Volcano's proportion plugin derives each queue's deserved share from the weights
            deserved = f"{spec.get('weight', 1) / total_weight:.0%} (weight)"
            capability = {k: v for k, v in (spec.get("capability") or {}).items() if str(v) != "0"}
            lines.append(
                f"{queue['metadata']['name']:12} {status.get('state', '-'):8} "
                f"{json.dumps(allocated) if allocated else '-':28} {deserved!s:18} "
                f"{json.dumps(capability) if capability else '-'}"
            )
        team_namespaces = {ns for team in fleet.teams for ns in team.effective_namespaces}
        pending = [
            p
            for p in cluster.get_json("pods", "-A", "--field-selector=status.phase=Pending")[
                "items"
            ]
            if p["metadata"]["namespace"] in team_namespaces and not p["spec"].get("nodeName")
        ]
        lines += ["", f"pending workloads ({len(pending)}):"]
        lines += [
            f"  {p['metadata']['namespace']}/{p['metadata']['name']}: {pending_reason(p)}"
            for p in pending
        ] or ["  (none)"]
        actions_file = self.services_dir / "controller" / "actions.jsonl"
        recent = actions_file.read_text().splitlines()[-12:] if actions_file.exists() else []
        lines += ["", "recent controller actions:"]
        for line in recent:
            entry = json.loads(line)
            if entry["event"] != "spend.publish":
                lines.append(
                    f"  {entry['at'][:19]} {entry['event']:14} {entry['target']}: {entry['reason'][:160]}"
                )
        if len(lines) and lines[-1] == "recent controller actions:":
            lines.append("  (none)")
        return "\n".join(lines)

    def play_scenario(self) -> str:
        from localfleet.scenario import Scenario, cleanup

        cleanup(self.cluster)
        return Scenario(stack=self, log=self.log).run()

    def up(self, *, controller: bool = True, scenario: bool = True) -> str:
        self.ensure_tools()
        self.check_sdks()
        self.check_kubeconfig()
        fresh = self.start_cluster()
        self.start_volcano()
        self.ensure_provider()
        self.ensure_stack()
        args = ["up", "--yes"]
        if fresh and self.resource_count() > 0:
            # The state describes objects of an earlier cluster: read the new one first.
            args.append("--refresh")
        started = time.monotonic()
        self.pulumi(*args)
        self.log(f"pulumi up of stack {self.stack!r} took {time.monotonic() - started:.1f}s")
        self.start_gate()
        self.start_prometheus()
        if self.node() is None:
            exit_code = self.controller_pass() if controller else None
            account = self.play_scenario() if scenario and controller else ""
            report = self.month_report() if scenario and controller else ""
            if controller:  # after the scenario, whose passes it would otherwise join
                self.start_admission_keeper()
            return self.summary(exit_code) + account + report
        self.wait_for_gate()
        exit_code = None
        if controller:
            exit_code, logs = self.controller_job(f"fleetplane-controller-up-{int(time.time())}")
            for line in logs.splitlines()[-15:]:
                self.log(f"  {line}")
        return self.summary(exit_code)

    def preview(self, *extra: str) -> None:
        self._require_cluster()
        self.ensure_provider()
        self.ensure_stack()
        self.pulumi("preview", "--diff", *extra)

    def down(self, *, keep: bool = False) -> None:
        cluster = self.cluster
        if cluster.running_pids() and self.pulumi_home.exists():
            self.ensure_provider()
            self.ensure_stack()
            self.pulumi("destroy", "--yes")
        self.admission_keeper.stop()
        self.opa.stop()
        self.prometheus.stop()
        self.pushgateway.stop()
        self.alertmanager.stop()
        self.dcgm_exporter.stop()
        self.volcano.stop()
        self._stop_cluster(keep=keep)
        self.log("local stack down" + (f"; data kept in {self.cluster_dir}" if keep else ""))

    def status(self) -> str:
        if not self.cluster.running_pids():
            return "local control plane: not running"
        return self.summary() + "\n" + self.live()

    def _require_cluster(self) -> None:
        if not self.cluster.running_pids():
            raise StackError("the local control plane is not running: `fleetplane up`")


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
