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
   detached), or reuses the running one, with Volcano and the workload operators (JobSet,
   LeaderWorkerSet, KubeRay, Kubeflow Trainer: `localfleet.operators`) as its processes;
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

The parts, one concern a module: the state's layout (localfleet/stacklayout.py), the Pulumi
driver (localfleet/pulumidriver.py), the servers on the host (localfleet/stackservices.py, the
definitions tests run, started detached), the controller on the host
(localfleet/hostcontroller.py) and the status (localfleet/stackstatus.py). The terminal gets
the steps and the fleet; the processes' JSON logs go to files, named on the last line.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localfleet.hostcontroller import HostController
from localfleet.karpenter import ensure_karpenter, stop_karpenter
from localfleet.operators import ensure_operators, stop_operators
from localfleet.pulumidriver import PulumiDriver
from localfleet.servers import PrometheusServer
from localfleet.stacklayout import (
    LOCAL_PASSPHRASE,
    STACK,
    STATE_DIR,
    StackError,
    StackLayout,
)
from localfleet.stackservices import StackServices
from localfleet.stackstatus import StackStatus

__all__ = ["LOCAL_PASSPHRASE", "STACK", "STATE_DIR", "LocalStack", "StackError"]

REAL_NODE_IMAGES = ("controller", "validator", "opa")
ALERTMANAGER_PORT = 9093
"""Where the main job's Alertmanager listens (Alertmanager's usual port); tests and any other
stack take a free one (`StackLayout.alertmanager_port`)."""


@dataclass
class LocalStack(StackLayout):
    """The `local` stack and the loopback parts around it: its layout (localfleet/stacklayout.py)
    and its lifecycle, over the Pulumi driver, the services, the controller on the host and
    the status, each a part of its own."""

    # the parts -------------------------------------------------------------------------------

    @property
    def pulumi_driver(self) -> PulumiDriver:
        return PulumiDriver(self)

    @property
    def services(self) -> StackServices:
        return StackServices(self)

    @property
    def controller(self) -> HostController:
        return HostController(self)

    @property
    def status_view(self) -> StackStatus:
        return StackStatus(self, self.services, self.controller)

    @property
    def prometheus(self) -> PrometheusServer:
        return self.services.prometheus

    def env(self) -> dict[str, str]:
        """The environment `pulumi` runs with: offline, local state, fixed passphrase."""
        return self.pulumi_driver.env()

    def pulumi(
        self, *args: str, capture: bool = False, check: bool = True, stack: bool = True
    ) -> Any:
        """Run the pinned `pulumi` on this stack (PulumiDriver.run)."""
        return self.pulumi_driver.run(*args, capture=capture, check=check, stack=stack)

    def resource_count(self) -> int:
        return self.pulumi_driver.resource_count()

    def controller_pass(self) -> int | None:
        return self.controller.controller_pass()

    def controller_job(self, name: str, timeout: float = 600.0) -> tuple[int, str]:
        return self.controller.controller_job(name, timeout)

    def controller_token(self) -> Path:
        return self.controller.controller_token()

    def exporter_address(self) -> str | None:
        return self.services.exporter_address()

    def spend(self, fleet: Any) -> dict[str, Any]:
        return self.status_view.spend(fleet)

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
        fleet.setdefault("upgrade", {})["validator_image"] = refs["validator"]
        gateway = fleet.setdefault("observability", {}).setdefault("pushgateway", {})
        if gateway.get("deploy") is False:  # the local fleet runs it: where pods reach it
            gateway["url"] = f"http://{node.network.host_ip}:{free_port()}"
        header = (
            f"# Derived from {self.stack_file} by `fleetplane up --real-node` "
            "(localfleet/stack.py); removed with the cluster.\n"
        )
        self.real_node_config.write_text(header + yaml.safe_dump(config, sort_keys=False))

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

    # Volcano ---------------------------------------------------------------------------------

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

    # commands --------------------------------------------------------------------------------

    def play_scenario(self) -> str:
        from localfleet.scenario import Scenario, cleanup

        cleanup(self.cluster)
        return Scenario(stack=self, log=self.log).run()

    def up(self, *, controller: bool = True, scenario: bool = True) -> str:
        """The main job; returns what it prints at the end (the fleet, the scenario's account,
        the report, and where the logs are)."""
        pulumi, services, host = self.pulumi_driver, self.services, self.controller
        pulumi.ensure_tools()
        pulumi.check_sdks()
        self.check_kubeconfig()
        fresh = self.start_cluster()
        services.start_placement(self.fleet())  # before the scheduler that calls it
        self.start_volcano()
        ensure_operators(self.cluster, bin_dir=self.bin_dir, log=self.log)
        ensure_karpenter(self.cluster, self.fleet(), bin_dir=self.bin_dir, log=self.log)
        pulumi.ensure_provider()
        pulumi.ensure_stack()
        args = ["up", "--yes"]
        if fresh and pulumi.resource_count() > 0:
            # The state describes objects of an earlier cluster: read the new one first.
            args.append("--refresh")
        started = time.monotonic()
        pulumi.run(*args)
        self.log(f"pulumi up of stack {self.stack!r} took {time.monotonic() - started:.1f}s")
        services.start_gate()
        services.start_prometheus()
        status = self.status_view
        if self.node() is None:
            exit_code = host.controller_pass() if controller else None
            account = self.play_scenario() if scenario and controller else ""
            report = host.month_report() if scenario and controller else ""
            if controller:  # after the scenario, whose passes it would otherwise join
                host.start_admission_keeper()
            return status.summary(exit_code) + account + report + "\n" + status.logs()
        self.wait_for_gate()
        exit_code = None
        if controller:
            name = f"fleetplane-controller-up-{int(time.time())}"
            exit_code, logs = host.controller_job(name)
            log_path = host.work_dir / f"{name}.log"
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log_path.write_text(logs)
            self.log(f"  controller Job {name}: exit {exit_code} (log: {log_path})")
        return status.summary(exit_code) + "\n" + status.logs()

    def preview(self, *extra: str) -> None:
        self._require_cluster()
        self.pulumi_driver.ensure_provider()
        self.pulumi_driver.ensure_stack()
        self.pulumi("preview", "--diff", *extra)

    def down(self, *, keep: bool = False) -> None:
        cluster = self.cluster
        if cluster.running_pids() and self.pulumi_home.exists():
            self.pulumi_driver.ensure_provider()
            self.pulumi_driver.ensure_stack()
            self.pulumi("destroy", "--yes")
        self.controller.admission_keeper.stop()
        self.services.stop()
        stop_operators(self.cluster)
        stop_karpenter(self.cluster)
        self.volcano.stop()
        self._stop_cluster(keep=keep)
        self.log("local stack down" + (f"; data kept in {self.cluster_dir}" if keep else ""))

    def status(self) -> str:
        if not self.cluster.running_pids():
            return "local control plane: not running"
        status = self.status_view
        return status.summary() + "\n" + status.live() + "\n\n" + status.logs()

    def _require_cluster(self) -> None:
        if not self.cluster.running_pids():
            raise StackError("the local control plane is not running: `fleetplane up`")
