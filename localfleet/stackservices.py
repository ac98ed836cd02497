"""The local stack's servers on the host: the gate's OPA, Prometheus with the Pushgateway and
Alertmanager, and the DCGM exporter stand-in.

Each is the definition tests run (localfleet/servers.py), started detached: it outlives
`fleetplane up`, and `fleetplane status` and `fleetplane down` find it by the pid and port files
in its directory under `<state_dir>/services/`. The ports are those of the stack's
configuration (`opa.external_url`, `controller.opa_url`, `controller.prometheus_url`,
`observability.pushgateway.url`): a port something else holds fails the start, naming its
holder. Alertmanager's port is the layout's (`alertmanager_port`, 0: a free one), and whatever
talks to it (Prometheus, the status) asks its supervisor where it is.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localfleet.placement import PlacementServer
from localfleet.processes import Supervisor, http_ok
from localfleet.servers import (
    AlertmanagerServer,
    OpaServer,
    PrometheusServer,
    PushgatewayServer,
    ServerError,
)
from localfleet.stacklayout import StackError, StackLayout, host_port, loopback

POLICY_KEY_SEPARATOR = "__"
"""ConfigMap keys stand for paths: `fleetplane__lib__keys.rego` is `fleetplane/lib/keys.rego`."""
ALERT_WAIT_SECONDS = 5
"""Alertmanager's group wait when the stack has a receiver (tests wait for its alerts)."""


@dataclass
class StackServices:
    """The servers of the stack of `layout`, started and found again."""

    layout: StackLayout

    def _dir(self, name: str) -> Path:
        return self.layout.services_dir / name

    @property
    def opa(self) -> OpaServer:
        return OpaServer(bin_dir=self.layout.bin_dir, work_dir=self._dir("opa"), detached=True)

    @property
    def prometheus(self) -> PrometheusServer:
        return PrometheusServer(
            bin_dir=self.layout.bin_dir, work_dir=self._dir("prometheus"), detached=True
        )

    @property
    def pushgateway(self) -> PushgatewayServer:
        return PushgatewayServer(
            bin_dir=self.layout.bin_dir, work_dir=self._dir("pushgateway"), detached=True
        )

    @property
    def alertmanager(self) -> AlertmanagerServer:
        return AlertmanagerServer(
            bin_dir=self.layout.bin_dir, work_dir=self._dir("alertmanager"), detached=True
        )

    @property
    def dcgm_exporter(self) -> Supervisor:
        return Supervisor("dcgm-exporter", self._dir("dcgm-exporter"), detached=True)

    @property
    def placement(self) -> PlacementServer:
        return PlacementServer(work_dir=self._dir("placement"), detached=True)

    def start_placement(self, fleet: Any) -> None:
        """The placement service on the port of `volcano.placement_url`, when the stack's
        placement is fgd (its default with a URL) with a loopback URL (the scheduler's extender
        calls it there): the shipped local stack's."""
        volcano = fleet.volcano
        if volcano.placement != "fgd" or not volcano.placement_url:
            return
        url = urllib.parse.urlsplit(volcano.placement_url)
        if url.hostname not in ("127.0.0.1", "localhost") or url.port is None:
            return
        server = self.placement
        if server.pid() is None:
            server.host, server.port = "127.0.0.1", url.port
            server.start()

    def stop(self) -> None:
        for server in (self.opa, self.prometheus, self.pushgateway, self.alertmanager):
            server.stop()
        self.placement.stop()
        self.dcgm_exporter.stop()

    # the gate --------------------------------------------------------------------------------

    def start_gate(self) -> None:
        """OPA on loopback, loaded from the gate's cluster objects: HTTPS at opa.external_url
        (the webhook), plain HTTP at controller.opa_url (the controller; a free loopback port
        when that is not on loopback). As in a cluster, it requires a bearer token (the
        controller's) for anything but admission decisions and health, and loads the authz
        document from the gate's Secret."""
        from fleet.opa import OPA_GC_ENV
        from fleet.render import opa_authz_secret

        fleet = self.layout.fleet()
        if fleet.opa.external_url is None:
            self.layout.log(
                "no admission gate outside the cluster in this stack (opa.external_url)"
            )
            return
        cluster, ns, name = self.layout.cluster, fleet.system_namespace, fleet.opa.name
        policies = cluster.get_json("configmap", f"{name}-policies", "-n", ns).get("data", {})
        data = cluster.get_json("configmap", f"{name}-data", "-n", ns).get("data", {})
        secret = cluster.get_json("secret", f"{name}-tls", "-n", ns).get("data", {})
        authz = cluster.get_json("secret", opa_authz_secret(fleet), "-n", ns).get("data", {})
        work = self._dir("opa")
        self.opa.stop()
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
        https_host, https_port = host_port(fleet.opa.external_url)
        plain = fleet.controller.opa_url
        plain_port = 0
        if plain and plain.startswith("http://") and loopback(plain):
            plain_port = host_port(plain)[1]
        opa = self.opa
        opa.policies = work / "policies"
        opa.port = plain_port
        opa.tls = (work / "certs" / "tls.crt", work / "certs" / "tls.key")
        opa.https_host, opa.https_port = https_host, https_port
        opa.data = (work / "data", work / "controller-data")
        opa.authz = json.loads(base64.b64decode(authz["data.json"]))
        opa.env = dict(OPA_GC_ENV)  # the GC settings the in-cluster Deployment gives OPA
        self._started(opa.start)
        if not self.gate_healthy():
            raise StackError(f"OPA answers on {opa.url} but not at {fleet.opa.external_url}")
        self.layout.log(
            f"OPA serving the gate at {fleet.opa.external_url} ({len(policies)} policies)"
        )

    def gate_healthy(self) -> bool:
        """The gate's OPA answers at `opa.external_url`, with the gate's serving certificate."""
        fleet = self.layout.fleet()
        ca = self._dir("opa") / "certs" / "ca.crt"
        if fleet.opa.external_url is None or self.opa.pid() is None or not ca.exists():
            return False
        host, port = host_port(fleet.opa.external_url)
        context = ssl.create_default_context(cafile=str(ca))
        return http_ok(f"https://{host}:{port}/health", context)

    def _controller_data(self, fleet: Any) -> dict[str, str]:
        """The files OPA loads from the controller's ConfigMap; none before its first pass."""
        from fleet.opa import controller_data_files
        from fleet.render import opa_data_configmap

        kept = opa_data_configmap(fleet)
        if kept is None:
            return {}
        namespace, _, name = kept.partition("/")
        found = self.layout.cluster.kubectl(
            "get", "configmap", name, "-n", namespace, "-o", "json", check=False
        )
        if found.returncode != 0 and "NotFound" in (found.stderr or ""):
            return {}
        if found.returncode != 0:
            raise StackError(f"cannot read ConfigMap {kept}: {found.stderr.strip()}")
        files = controller_data_files(json.loads(found.stdout).get("data") or {})
        # the fleet-sized documents' parts (fleet/opa_shards.py), ConfigMaps beside it
        from fleet.opa_shards import shard_files

        listed = self.layout.cluster.kubectl(
            "get",
            "configmaps",
            "-n",
            namespace,
            "-l",
            "app.kubernetes.io/managed-by=fleetplane-controller",
            "-o",
            "json",
        )
        parts = {
            i["metadata"]["name"]: i.get("data") or {} for i in json.loads(listed.stdout)["items"]
        }
        return {**files, **shard_files(name, parts.get)}

    # observability ---------------------------------------------------------------------------

    def alertmanager_address(self) -> str | None:
        """host:port of the running Alertmanager, as its supervisor recorded it."""
        port = self.alertmanager.running_port()
        return None if port is None else f"127.0.0.1:{port}"

    def exporter_address(self) -> str | None:
        port = self.dcgm_exporter.port()
        return None if port is None else f"127.0.0.1:{port}"

    def start_dcgm_exporter(self) -> str:
        """The dcgm-exporter stand-in for the fake GPU nodes (`localfleet.dcgm_exporter`)."""
        running = self.exporter_address()
        if running is not None:
            return running
        layout = self.layout
        port = self.dcgm_exporter.serve(
            lambda port: [
                str(layout.python),
                "-m",
                "localfleet.dcgm_exporter",
                "--kubeconfig",
                str(layout.cluster.kubeconfig),
                "--port",
                str(port),
            ],
            lambda port: http_ok(f"http://127.0.0.1:{port}/health"),
            timeout=60,
            cwd=self._dir("dcgm-exporter"),
            env={"PYTHONPATH": str(layout.root)},
        )
        layout.log(f"DCGM exporter stand-in at http://127.0.0.1:{port}/metrics")
        return f"127.0.0.1:{port}"

    def start_prometheus(self) -> None:
        """Prometheus at `controller.prometheus_url`, evaluating the rule set
        (observability/rules.yaml, the stack's numbers) and scraping the Pushgateway the
        controller pushes to; alerts go to a local Alertmanager (to `alert_webhook`, or to
        no receiver: see them with `amtool` or its UI). With a real node, Prometheus listens on
        the host's end of the node's veth, where pods reach it."""
        from components.gpu_operator import dcgm_service_monitor
        from fleet.render import pushgateway_url
        from localfleet.dcgm_exporter import scrape_config
        from observability.rules import write_rule_file

        layout = self.layout
        fleet = layout.fleet()
        url = fleet.controller.prometheus_url
        if not layout.served_here(url):
            return
        gateway = pushgateway_url(fleet)
        pushgateway: str | None = None
        if layout.served_here(gateway):
            host, port = host_port(gateway)
            started = self.pushgateway
            started.host, started.port = host, port
            self._started(started.start)
            pushgateway = started.address
            layout.log(f"Pushgateway at {started.url}")
        alertmanager = self.alertmanager
        alertmanager.port = layout.alertmanager_port
        alertmanager.webhook_url = layout.alert_webhook
        if layout.alert_webhook:
            alertmanager.wait_seconds = ALERT_WAIT_SECONDS
        self._started(alertmanager.start)
        layout.log(f"Alertmanager at {alertmanager.url}")
        exporter = self.start_dcgm_exporter()
        gpu_nodes = sorted(
            node["metadata"]["name"]
            for node in layout.cluster.get_json("nodes")["items"]
            if int(node.get("status", {}).get("allocatable", {}).get("nvidia.com/gpu", 0) or 0)
        )
        prometheus = self.prometheus
        prometheus.host, prometheus.port = host_port(url)
        self._dir("prometheus").mkdir(parents=True, exist_ok=True)
        prometheus.rule_files = (write_rule_file(fleet, self._dir("prometheus") / "rules.yaml"),)
        prometheus.pushgateway = pushgateway
        prometheus.alertmanager = alertmanager.address
        prometheus.scrape_configs = [
            scrape_config(dcgm_service_monitor(fleet), exporter, gpu_nodes)
        ]
        self._started(prometheus.start)
        layout.log(f"Prometheus at {url} (rules: {prometheus.rule_files[0]})")

    @staticmethod
    def _started(start: Any) -> None:
        """Start a server; a server that cannot start is a step of the stack that failed."""
        try:
            start()
        except ServerError as error:
            raise StackError(str(error)) from error
