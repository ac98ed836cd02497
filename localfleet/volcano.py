"""The real Volcano on the local control plane: the pinned release's CRDs, its scheduler,
controller manager and admission webhooks as processes, configured by the same code that
renders the cloud stacks' Helm values (`components.volcano`).

What the Helm chart does in a cluster, this does on loopback:

- the release's CRDs (`tools/bin/volcano-crds.yaml`, taken from the chart by the bootstrap);
- `vc-webhook-manager` serving Volcano's admissions (`components.volcano.ADMISSIONS`, with the
  admission configuration `admission_config` renders: every pod of a team namespace goes to
  the Volcano scheduler) over HTTPS with a certificate from the local CA, and the
  webhook configurations the chart's `templates/webhooks.yaml` declares, pointing at it by URL;
- `vc-controller-manager` (PodGroups for pods, Volcano Jobs, queue status);
- `vc-scheduler` with `scheduler_config(fleet)`, the `volcano-scheduler.conf` of production.

kube-scheduler keeps running beside it for the pods Volcano does not own (outside team
namespaces), as in a cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.volcano import (
    ADMISSIONS,
    ENABLED_ADMISSIONS,
    WEBHOOK_NAMESPACE_SELECTOR,
    admission_config,
    scheduler_config,
)
from fleet.config import FleetConfig
from localfleet.binaries import bin_dir as pinned_bin_dir
from localfleet.controlplane import (
    ClusterError,
    LocalCluster,
    free_ports,
    require_binaries,
)
from localfleet.pki import client_certificate, client_kubeconfig, serving_certificate
from localfleet.processes import alive, http_ok, spawn

CRDS_FILE = "volcano-crds.yaml"
"""The release's CRDs as the bootstrap caches them from the chart's `crd/bases`."""
COMPONENTS = ("vc-webhook-manager", "vc-controller-manager", "vc-scheduler")
CONTROLLERS = (
    # The jobflow controllers wait forever on CRDs the chart installs only with jobflow; the
    # others need node agents or topology this fleet does not have.
    "*,-sharding-controller,-jobflow-controller,-jobtemplate-controller,"
    "-colocation-config-controller,-hyperNode-controller"
)
CONTROLLERS_IDENTITY = "system:serviceaccount:volcano-system:volcano-controllers"
"""Who vc-controller-manager is to the API server and the admission gate: the chart's
ServiceAccount, which the gate trusts to create PodGroups (fleet.render.render_platform). The
local client certificate carries that name (and system:masters for its permissions)."""
SCHEDULE_PERIOD = "1s"
"""The chart's default; the scheduler runs a session every second."""

# The webhooks of `templates/webhooks.yaml` in the chart of the pinned release: path -> kind,
# webhook name, API group, resource, operations. Each has failurePolicy Fail and a 10 s
# timeout there, as here.
WEBHOOKS: dict[str, tuple[str, str, str, str, tuple[str, ...]]] = {
    "/pods/mutate": ("Mutating", "mutatepod.volcano.sh", "", "pods", ("CREATE",)),
    "/queues/mutate": (
        "Mutating",
        "mutatequeue.volcano.sh",
        "scheduling.volcano.sh",
        "queues",
        ("CREATE",),
    ),
    "/podgroups/mutate": (
        "Mutating",
        "mutatepodgroup.volcano.sh",
        "scheduling.volcano.sh",
        "podgroups",
        ("CREATE",),
    ),
    "/jobs/mutate": ("Mutating", "mutatejob.volcano.sh", "batch.volcano.sh", "jobs", ("CREATE",)),
    "/jobs/validate": (
        "Validating",
        "validatejob.volcano.sh",
        "batch.volcano.sh",
        "jobs",
        ("CREATE", "UPDATE"),
    ),
    "/queues/validate": (
        "Validating",
        "validatequeue.volcano.sh",
        "scheduling.volcano.sh",
        "queues",
        ("CREATE", "UPDATE", "DELETE"),
    ),
    "/podgroups/validate": (
        "Validating",
        "validatepodgroup.volcano.sh",
        "scheduling.volcano.sh",
        "podgroups",
        ("CREATE",),
    ),
    "/hypernodes/validate": (
        "Validating",
        "validatehypernodes.volcano.sh",
        "topology.volcano.sh",
        "hypernodes",
        ("CREATE", "UPDATE"),
    ),
}
WEBHOOK_PREFIX = "volcano-admission-service"
"""The chart's names, which vc-webhook-manager looks up to fill in the CA bundle."""


def crds_path(bin_dir: Path | None = None) -> Path:
    return (bin_dir or pinned_bin_dir()) / CRDS_FILE


def install_volcano_crds(cluster: LocalCluster, *, bin_dir: Path | None = None) -> None:
    """Apply the pinned release's CRDs and wait until the API server serves them."""
    path = crds_path(bin_dir)
    require_binaries(path.parent, (path.name,))
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    wanted = {
        "queues.scheduling.volcano.sh",
        "podgroups.scheduling.volcano.sh",
        "jobs.batch.volcano.sh",
        "commands.bus.volcano.sh",
    }

    def established() -> bool:
        # `kubectl wait` fails outright on a CRD whose status has no conditions yet.
        return wanted <= {
            crd["metadata"]["name"]
            for crd in cluster.get_json("crd")["items"]
            if any(
                c.get("type") == "Established" and c.get("status") == "True"
                for c in (crd.get("status") or {}).get("conditions") or []
            )
        }

    cluster.wait_until("Volcano's CRDs Established", established, time.monotonic() + 60)


def webhook_configurations(url: str, ca_pem: str) -> list[dict[str, Any]]:
    """The chart's webhook configurations for `ADMISSIONS`, calling `url` (the local
    vc-webhook-manager) instead of the in-cluster Service."""
    import base64

    out = []
    for path in ADMISSIONS:
        kind, name, group, resource, operations = WEBHOOKS[path]
        out.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": f"{kind}WebhookConfiguration",
                "metadata": {"name": WEBHOOK_PREFIX + path.replace("/", "-")},
                "webhooks": [
                    {
                        "name": name,
                        "admissionReviewVersions": ["v1"],
                        "clientConfig": {
                            "url": url + path,
                            "caBundle": base64.b64encode(ca_pem.encode()).decode(),
                        },
                        "failurePolicy": "Fail",
                        "matchPolicy": "Equivalent",
                        "namespaceSelector": {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/metadata.name",
                                    "operator": "NotIn",
                                    "values": ["kube-system"],
                                },
                                *WEBHOOK_NAMESPACE_SELECTOR,
                            ]
                        },
                        "rules": [
                            {
                                "apiGroups": [group],
                                "apiVersions": ["v1" if group == "" else "*"],
                                "operations": list(operations),
                                "resources": [resource],
                                "scope": "*",
                            }
                        ],
                        "sideEffects": "NoneOnDryRun",
                        "timeoutSeconds": 10,
                        **({"reinvocationPolicy": "Never"} if kind == "Mutating" else {}),
                    }
                ],
            }
        )
    return out


@dataclass
class LocalVolcano:
    """Volcano's three processes on a running local cluster, configured from `fleet`.

    Their pids are kept in `<cluster data>/volcano/pids.json`, so a later command (`down`)
    stops what `up` started."""

    cluster: LocalCluster
    fleet: FleetConfig
    bin_dir: Path = field(default_factory=pinned_bin_dir)
    log: Callable[[str], None] = field(default=lambda message: None)
    schedule_period: str = SCHEDULE_PERIOD
    """How often vc-scheduler runs a session (a test that waits for one pod at a time
    restarts it with a shorter one)."""
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, init=False)
    ports: dict[str, int] = field(default_factory=dict, init=False)

    @property
    def work_dir(self) -> Path:
        assert self.cluster.data_dir is not None
        return self.cluster.data_dir / "volcano"

    @property
    def logs_dir(self) -> Path:
        return self.cluster.logs_dir

    @property
    def webhook_url(self) -> str:
        return f"https://127.0.0.1:{self.ports['webhook']}"

    def start(self, *, timeout: float = 120.0) -> LocalVolcano:
        require_binaries(self.bin_dir, (*COMPONENTS, CRDS_FILE))
        if self.running_pids():
            raise ClusterError(f"Volcano is already running from {self.work_dir}")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        names = (
            "webhook",
            "webhook-healthz",
            "controllers",
            "controllers-healthz",
            "scheduler",
            "scheduler-healthz",
        )
        self.ports = dict(zip(names, free_ports(len(names)), strict=True))
        deadline = time.monotonic() + timeout
        try:
            install_volcano_crds(self.cluster, bin_dir=self.bin_dir)
            self.write_configuration()
            self.write_controllers_kubeconfig()
            self._start_webhook_manager(deadline)
            for name in ("vc-controller-manager", "vc-scheduler"):
                self.start_component(name, deadline=deadline)
        except BaseException:
            self.stop()
            raise
        self._write_pids()
        return self

    def write_controllers_kubeconfig(self) -> None:
        pki = self.cluster.data_dir / "pki"  # type: ignore[operator]
        client_certificate(
            pki,
            "volcano-controllers",
            common_name=CONTROLLERS_IDENTITY,
            organization="system:masters",
        )
        (self.work_dir / "controllers.kubeconfig").write_text(
            client_kubeconfig(self._server(), pki, "volcano-controllers")
        )

    def _server(self) -> str:
        """The API server's URL, from the admin kubeconfig (a cluster object made from its pid
        file knows its ports only once asked)."""
        config = json.loads(self.cluster.kubeconfig.read_text())
        return str(config["clusters"][0]["cluster"]["server"])

    def write_configuration(self) -> None:
        """The scheduler's and the webhook's configuration files, from the fleet."""
        (self.work_dir / "volcano-scheduler.conf").write_text(scheduler_config(self.fleet))
        (self.work_dir / "volcano-admission.conf").write_text(admission_config(self.fleet))

    def _start_webhook_manager(self, deadline: float) -> None:
        pki = self.cluster.data_dir / "pki"  # type: ignore[operator]
        cert, key = serving_certificate(pki, "volcano-admission", ("localhost", "127.0.0.1"))
        (self.work_dir / "webhook.crt").write_text(cert)
        (self.work_dir / "webhook.key").write_text(key)
        (self.work_dir / "webhook.key").chmod(0o600)
        # The manager fills in the CA of configurations that exist, and waits for them before
        # it serves: they are declared first (their calls fail, as in a cluster, until it does).
        self.cluster.apply(webhook_configurations(self.webhook_url, (pki / "ca.crt").read_text()))
        self.start_component("vc-webhook-manager", deadline=deadline)

    def command(self, name: str) -> list[str]:
        kubeconfig = f"--kubeconfig={self.cluster.kubeconfig}"
        binary = str(self.bin_dir / name)
        if name == "vc-webhook-manager":
            return [
                binary,
                kubeconfig,
                f"--tls-cert-file={self.work_dir / 'webhook.crt'}",
                f"--tls-private-key-file={self.work_dir / 'webhook.key'}",
                f"--ca-cert-file={self.cluster.data_dir / 'pki' / 'ca.crt'}",  # type: ignore[operator]
                f"--webhook-url={self.webhook_url}",
                "--listen-address=127.0.0.1",
                f"--port={self.ports['webhook']}",
                f"--enabled-admission={ENABLED_ADMISSIONS}",
                f"--admission-conf={self.work_dir / 'volcano-admission.conf'}",
                "--enable-healthz=true",
                f"--healthz-address=127.0.0.1:{self.ports['webhook-healthz']}",
            ]
        if name == "vc-controller-manager":
            return [
                binary,
                f"--kubeconfig={self.work_dir / 'controllers.kubeconfig'}",
                "--leader-elect=false",
                f"--controllers={CONTROLLERS}",
                f"--listen-address=127.0.0.1:{self.ports['controllers']}",
                "--enable-healthz=true",
                f"--healthz-address=127.0.0.1:{self.ports['controllers-healthz']}",
            ]
        return [
            binary,
            kubeconfig,
            "--leader-elect=false",
            f"--scheduler-conf={self.work_dir / 'volcano-scheduler.conf'}",
            f"--schedule-period={self.schedule_period}",
            f"--listen-address=127.0.0.1:{self.ports['scheduler']}",
            "--enable-healthz=true",
            f"--healthz-address=127.0.0.1:{self.ports['scheduler-healthz']}",
        ]

    def _healthz(self, name: str) -> str:
        port = {
            "vc-webhook-manager": "webhook-healthz",
            "vc-controller-manager": "controllers-healthz",
            "vc-scheduler": "scheduler-healthz",
        }[name]
        return f"http://127.0.0.1:{self.ports[port]}/healthz"

    def _healthy(self, name: str) -> bool:
        if name != "vc-webhook-manager":
            return http_ok(self._healthz(name))
        # The webhook manager serves its health check over TLS with the webhook's certificate.
        import ssl

        context = ssl.create_default_context(cafile=str(self.cluster.data_dir / "pki" / "ca.crt"))  # type: ignore[operator]
        return http_ok(self._healthz(name).replace("http://", "https://"), context=context)

    def start_component(self, name: str, *, deadline: float | None = None) -> None:
        """Start one of the three (again: the fault tests kill and restart them) and wait
        until its health check answers."""
        self.log(f"starting {name}")
        proc = spawn(self.command(name), self.logs_dir / f"{name}.log")
        self.processes[name] = proc
        deadline = deadline or time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ClusterError(
                    f"{name} exited with {proc.returncode}:\n{self.cluster.log_tail(name)}"
                )
            if self._healthy(name):
                if self.cluster.data_dir is not None and (self.work_dir / "pids.json").exists():
                    self._write_pids()
                return
            time.sleep(0.2)
        raise ClusterError(f"timed out waiting for {name}:\n{self.cluster.log_tail(name)}")

    def kill(self, name: str) -> None:
        """SIGKILL one component (a crash, for the fault tests)."""
        pid = self.running_pids().get(name)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            proc = self.processes.pop(name, None)
            if proc is not None:
                proc.wait(timeout=10)

    def stop(self) -> None:
        for pid in reversed(list(self._read_pids().values())):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)
        for proc in self.processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for pid in self._read_pids().values():
            while time.monotonic() < deadline and alive(pid):
                time.sleep(0.1)
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
        for proc in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        self.processes.clear()
        (self.work_dir / "pids.json").unlink(missing_ok=True)

    def _write_pids(self) -> None:
        state = {
            "pids": {name: proc.pid for name, proc in self.processes.items()},
            "ports": self.ports,
        }
        (self.work_dir / "pids.json").write_text(json.dumps(state, indent=2))

    def _read_pids(self) -> dict[str, int]:
        pids: dict[str, int] = {name: proc.pid for name, proc in self.processes.items()}
        path = self.work_dir / "pids.json"
        if path.exists():
            state = json.loads(path.read_text())
            self.ports = self.ports or state.get("ports", {})
            for name, pid in state.get("pids", {}).items():
                pids.setdefault(name, int(pid))
        return pids

    def running_pids(self) -> dict[str, int]:
        return {name: pid for name, pid in self._read_pids().items() if alive(pid)}
