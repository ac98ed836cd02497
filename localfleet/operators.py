"""The workload operators teams use, as real parts of the local control plane: JobSet,
LeaderWorkerSet, KubeRay and Kubeflow Trainer at the releases tools/bootstrap pins.

What their Helm charts and kustomize bases do in a cluster, this does on loopback:

- each release's CRDs (`tools/bin/<operator>-crds.yaml`, taken from the release by the bootstrap);
- each controller manager as a process, authenticated with a token of the ServiceAccount its
  chart runs it as, read from the fleet configuration's built-in operators
  (`fleet.config.operators`), the same entries the gate trusts and is sent the kinds of;
- their admission webhooks served with a certificate from the local CA, and the webhook
  configurations of the release (`Webhook`), pointing at them by URL;
- Volcano gang scheduling wherever the release has it: LeaderWorkerSet's Volcano scheduler
  provider, KubeRay's `--batch-scheduler=volcano`, and the Trainer's Volcano PodGroup policy on
  the release's `torch-distributed` runtime. JobSet v0.10 has no integration of its own
  (docs/operators.md says how its pods gang through Volcano).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet.config.operators import BUILTIN_OPERATORS
from fleet.render import service_account
from localfleet.binaries import bin_dir as pinned_bin_dir
from localfleet.controlplane import ClusterError, LocalCluster, free_ports, require_binaries
from localfleet.pki import admin_kubeconfig, serving_certificate
from localfleet.processes import ServerError, Supervisor, http_ok

# --- who each operator is ----------------------------------------------------------------------


@dataclass(frozen=True)
class Webhook:
    """One webhook of a release's webhook configurations (`failurePolicy: Fail` in all four)."""

    kind: str  # Mutating | Validating
    name: str
    path: str
    group: str
    version: str
    resource: str
    operations: tuple[str, ...]
    pods_labelled: str = ""
    """For the pod webhooks: the label the chart's objectSelector requires (only the operator's
    own pods are sent)."""


@dataclass(frozen=True)
class Operator:
    """One operator: its binary, the fleet configuration's entry naming who it runs as and the
    kinds it owns, and its webhooks."""

    name: str
    config_name: str
    """Its entry in the fleet configuration's `operators` (fleet.config.operators)."""
    webhooks: tuple[Webhook, ...] = ()

    @property
    def _entry(self) -> dict[str, Any]:
        return BUILTIN_OPERATORS[self.config_name]

    @property
    def namespace(self) -> str:
        return str(self._entry["service_accounts"][0]).split("/", 1)[0]

    @property
    def service_account(self) -> str:
        return str(self._entry["service_accounts"][0]).split("/", 1)[1]

    @property
    def user(self) -> str:
        """The user name it authenticates as: its ServiceAccount's, the identity the gate
        trusts (`fleet.render.service_account`)."""
        return service_account(self.namespace, self.service_account)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The resources teams submit to it, as group/resource."""
        return tuple(
            f"{kind['group']}/{resource}"
            for kind in self._entry["kinds"]
            for resource in kind["resources"]
        )

    @property
    def crds_file(self) -> str:
        return f"{self.name}-crds.yaml"


def kubebuilder_webhooks(
    group: str, version: str, kind: str, *, mutate: tuple[str, ...], pods_labelled: str
) -> tuple[Webhook, ...]:
    """The four webhooks a kubebuilder operator of one kind declares (controller-runtime's
    paths and `kb.io` names): mutating and validating for its kind, and for its pods, which
    the chart's objectSelector narrows to those carrying `pods_labelled`."""
    plural, path = f"{kind}s", f"{group.replace('.', '-')}-{version}-{kind}"
    return (
        Webhook("Mutating", f"m{kind}.kb.io", f"/mutate-{path}", group, version, plural, mutate),
        Webhook(
            "Mutating",
            "mpod.kb.io",
            "/mutate--v1-pod",
            "",
            "v1",
            "pods",
            ("CREATE",),
            pods_labelled,
        ),
        Webhook(
            "Validating",
            f"v{kind}.kb.io",
            f"/validate-{path}",
            group,
            version,
            plural,
            ("CREATE", "UPDATE"),
        ),
        Webhook(
            "Validating",
            "vpod.kb.io",
            "/validate--v1-pod",
            "",
            "v1",
            "pods",
            ("CREATE",),
            pods_labelled,
        ),
    )


JOBSET = Operator(
    name="jobset",
    config_name="jobset",
    # config/components/webhook/manifests.yaml, with the chart's pod objectSelector
    webhooks=kubebuilder_webhooks(
        "jobset.x-k8s.io",
        "v1alpha2",
        "jobset",
        mutate=("CREATE",),
        pods_labelled="jobset.sigs.k8s.io/jobset-name",
    ),
)
LWS = Operator(
    name="lws",
    config_name="leaderworkerset",
    # charts/lws/templates/webhook/webhook.yaml
    webhooks=kubebuilder_webhooks(
        "leaderworkerset.x-k8s.io",
        "v1",
        "leaderworkerset",
        mutate=("CREATE", "UPDATE"),
        pods_labelled="leaderworkerset.sigs.k8s.io/name",
    ),
)
KUBERAY = Operator(
    name="kuberay",
    config_name="kuberay",
    # The operator serves its (validating, RayCluster) webhook only with ENABLE_WEBHOOKS=true, on
    # controller-runtime's fixed port 9443; its chart leaves it off, and so does the local fleet.
)
TRAINER = Operator(
    name="trainer",
    config_name="kubeflow-trainer",
    # manifests/base/webhook/manifests.yaml
    webhooks=tuple(
        Webhook(
            "Validating",
            f"validator.{resource[:-1]}.trainer.kubeflow.org",
            f"/validate-trainer-kubeflow-org-v1alpha1-{resource[:-1]}",
            "trainer.kubeflow.org",
            "v1alpha1",
            resource,
            ("CREATE", "UPDATE"),
        )
        for resource in ("clustertrainingruntimes", "trainingruntimes", "trainjobs")
    ),
)
OPERATORS: dict[str, Operator] = {op.name: op for op in (JOBSET, LWS, KUBERAY, TRAINER)}
"""Every operator of the local fleet, by binary name. Order matters: the Trainer creates
JobSets, so JobSet's webhooks must serve first."""

VOLCANO_SCHEDULER = "volcano"
TOKEN_HOURS = 24 * 365
"""How long the operators' ServiceAccount tokens last (a local stack may stay up for days)."""
TORCH_RUNTIME_FILE = "trainer-torch-runtime.yaml"
"""The release's `torch-distributed` ClusterTrainingRuntime, as the bootstrap caches it."""


def operator_identities() -> list[dict[str, str]]:
    """Who each operator is, as the fleet configuration names trusted controllers: its user
    name (its ServiceAccount's, locally as in a cluster) and the kinds it owns."""
    return [
        {
            "operator": op.name,
            "user": op.user,
            "namespace": op.namespace,
            "service_account": op.service_account,
            "kinds": ",".join(op.kinds),
        }
        for op in OPERATORS.values()
    ]


# --- the cluster objects -----------------------------------------------------------------------


def webhook_configurations(op: Operator, url: str, ca_pem: str) -> list[dict[str, Any]]:
    """The release's webhook configurations of `op`, calling `url` (its local process)."""
    out = []
    for kind in ("Mutating", "Validating"):
        hooks = [hook for hook in op.webhooks if hook.kind == kind]
        if not hooks:
            continue
        webhooks = []
        for hook in hooks:
            webhook: dict[str, Any] = {
                "name": hook.name,
                "admissionReviewVersions": ["v1"],
                "clientConfig": {
                    "url": url + hook.path,
                    "caBundle": base64.b64encode(ca_pem.encode()).decode(),
                },
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "rules": [
                    {
                        "apiGroups": [hook.group],
                        "apiVersions": [hook.version],
                        "operations": list(hook.operations),
                        "resources": [hook.resource],
                    }
                ],
            }
            if hook.pods_labelled:
                webhook["objectSelector"] = {
                    "matchExpressions": [{"key": hook.pods_labelled, "operator": "Exists"}]
                }
            webhooks.append(webhook)
        out.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": f"{kind}WebhookConfiguration",
                "metadata": {"name": f"{op.name}-{kind.lower()}-webhook-configuration"},
                "webhooks": webhooks,
            }
        )
    return out


def volcano_torch_runtime(release_runtime: str) -> dict[str, Any]:
    """The release's `torch-distributed` ClusterTrainingRuntime with the Trainer's Volcano
    PodGroup policy: every TrainJob on it gangs through Volcano (one PodGroup of all its
    nodes, queue from the TrainJob's `scheduling.volcano.sh/queue-name` annotation)."""
    import yaml

    runtime = dict(yaml.safe_load(release_runtime))
    runtime["spec"]["podGroupPolicy"] = {"volcano": {}}
    return runtime


def install_crds(cluster: LocalCluster, bin_dir: Path, ops: list[Operator]) -> None:
    """Apply the releases' CRDs and wait until the API server serves them."""
    install_crd_files(cluster, bin_dir, [op.crds_file for op in ops], "the operators' CRDs")


def install_crd_files(cluster: LocalCluster, bin_dir: Path, files: list[str], what: str) -> None:
    """Apply the CRD files the bootstrap put in `bin_dir` and wait until the API server serves
    every CRD in them."""
    paths = [bin_dir / name for name in files]
    require_binaries(bin_dir, tuple(p.name for p in paths))
    import yaml

    wanted: set[str] = set()
    for path in paths:
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
        wanted |= {
            doc["metadata"]["name"]
            for doc in yaml.safe_load_all(path.read_text())
            if doc and doc.get("kind") == "CustomResourceDefinition"
        }

    def established() -> bool:
        return wanted <= {
            crd["metadata"]["name"]
            for crd in cluster.get_json("crd")["items"]
            if any(
                c.get("type") == "Established" and c.get("status") == "True"
                for c in (crd.get("status") or {}).get("conditions") or []
            )
        }

    cluster.wait_until(f"{what} Established", established, time.monotonic() + 60)


# --- the processes -----------------------------------------------------------------------------


@dataclass
class LocalOperators:
    """The operators' controller managers on a running local cluster (with Volcano running:
    their gang scheduling creates Volcano PodGroups), one `Supervisor` each.

    Detached (`fleetplane up`), they outlive the command and `down` finds them by the pid files
    in `<cluster data>/operators/<name>/`; attached (tests), they die with the test run."""

    cluster: LocalCluster
    names: tuple[str, ...] = tuple(OPERATORS)
    bin_dir: Path = field(default_factory=pinned_bin_dir)
    log: Callable[[str], None] = field(default=lambda message: None)
    detached: bool = True
    ports: dict[str, int] = field(default_factory=dict, init=False)
    supervisors: dict[str, Supervisor] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.supervisors = {
            name: Supervisor(name, self.work_dir / name, detached=self.detached)
            for name in self.names
        }

    @property
    def work_dir(self) -> Path:
        assert self.cluster.data_dir is not None
        return self.cluster.data_dir / "operators"

    @property
    def pki(self) -> Path:
        assert self.cluster.data_dir is not None
        return self.cluster.data_dir / "pki"

    @property
    def operators(self) -> list[Operator]:
        return [OPERATORS[name] for name in self.names]

    def webhook_url(self, name: str) -> str:
        return f"https://127.0.0.1:{self.ports[f'{name}-webhook']}"

    def start(self, *, timeout: float = 180.0) -> LocalOperators:
        require_binaries(self.bin_dir, tuple(self.names))
        if self.running_pids():
            raise ClusterError(f"the operators are already running from {self.work_dir}")
        keys = [f"{name}-{port}" for name in self.names for port in ("webhook", "health")]
        self.ports = dict(zip(keys, free_ports(len(keys)), strict=True))
        deadline = time.monotonic() + timeout
        try:
            install_crds(self.cluster, self.bin_dir, self.operators)
            for op in self.operators:
                self.start_operator(op, deadline=deadline)
            if TRAINER.name in self.names:
                self.install_trainer_runtime()
        except BaseException:
            self.stop()
            raise
        return self

    def start_operator(self, op: Operator, *, deadline: float) -> None:
        work = self.work_dir / op.name
        certs = work / "certs"
        certs.mkdir(parents=True, exist_ok=True)
        # controller-runtime's webhook server reads tls.crt and tls.key from its CertDir.
        cert, key = serving_certificate(self.pki, f"{op.name}-webhook", ("localhost", "127.0.0.1"))
        (certs / "tls.crt").write_text(cert)
        (certs / "tls.key").write_text(key)
        (certs / "tls.key").chmod(0o600)
        (work / "kubeconfig").write_text(self.service_account_kubeconfig(op))
        configurations = webhook_configurations(
            op, self.webhook_url(op.name), (self.pki / "ca.crt").read_text()
        )
        if configurations:
            self.cluster.apply(configurations)
        self.log(f"starting {op.name}")
        command, env = self.command(op)
        ready = f"http://127.0.0.1:{self.ports[f'{op.name}-health']}/readyz"
        try:
            self.supervisors[op.name].run(
                command,
                lambda: http_ok(ready),
                timeout=max(deadline - time.monotonic(), 1.0),
                env=env,
            )
        except ServerError as error:
            raise ClusterError(str(error)) from error

    def service_account_kubeconfig(self, op: Operator) -> str:
        """A kubeconfig with a token of the operator's own ServiceAccount (bound to
        cluster-admin here; its chart's ClusterRole in a cluster). A token rather than a client
        certificate: a certificate's CN holds at most 64 characters, fewer than the Trainer's
        ServiceAccount user name, and a token carries the ServiceAccount's groups too."""
        self.cluster.apply(
            [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": op.namespace}},
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": op.service_account, "namespace": op.namespace},
                },
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": f"fleetplane-local-{op.name}"},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": "cluster-admin",
                    },
                    "subjects": [
                        {
                            "kind": "ServiceAccount",
                            "name": op.service_account,
                            "namespace": op.namespace,
                        }
                    ],
                },
            ]
        )
        token = self.cluster.kubectl(
            "create",
            "token",
            op.service_account,
            "-n",
            op.namespace,
            f"--duration={TOKEN_HOURS}h",
        ).stdout.strip()
        config = json.loads(admin_kubeconfig(_server(self.cluster), self.pki))
        config["users"][0] = {"name": op.name, "user": {"token": token}}
        config["contexts"][0]["context"]["user"] = op.name
        return json.dumps(config, indent=2)

    def command(self, op: Operator) -> tuple[list[str], dict[str, str]]:
        """The operator's command line and environment: its configuration file where the
        release reads one (webhook on loopback with our certificate, no leader election, no
        self-managed certificates, metrics off), flags otherwise."""
        work = self.work_dir / op.name
        health = f"127.0.0.1:{self.ports[f'{op.name}-health']}"
        webhook_port = self.ports[f"{op.name}-webhook"]
        env: dict[str, str] = {}
        binary = str(self.bin_dir / op.name)
        kubeconfig = f"--kubeconfig={work / 'kubeconfig'}"
        configuration: dict[str, Any] = {
            "kind": "Configuration",
            "health": {"healthProbeBindAddress": health},
            "metrics": {"bindAddress": "0"},
            "leaderElection": {"leaderElect": False},
            "webhook": {"port": webhook_port, "host": "127.0.0.1"},
        }
        if op is KUBERAY:
            return [
                binary,
                kubeconfig,
                f"--health-probe-bind-address={health}",
                "--metrics-addr=0",
                "--enable-leader-election=false",
                f"--batch-scheduler={VOLCANO_SCHEDULER}",
                "--log-stdout-encoder=console",
            ], env
        if op is TRAINER:
            configuration["apiVersion"] = "config.trainer.kubeflow.org/v1alpha1"
            configuration["certManagement"] = {"enable": False}
            # The Trainer's configuration has no certificate folder: controller-runtime's default
            # is under the temporary directory.
            env["TMPDIR"] = str(work / "tmp")
            target = work / "tmp" / "k8s-webhook-server" / "serving-certs"
            target.mkdir(parents=True, exist_ok=True)
            for name in ("tls.crt", "tls.key"):
                (target / name).write_bytes((work / "certs" / name).read_bytes())
        else:
            group = {JOBSET.name: "config.jobset.x-k8s.io", LWS.name: "config.lws.x-k8s.io"}
            configuration["apiVersion"] = f"{group[op.name]}/v1alpha1"
            configuration["internalCertManagement"] = {"enable": False}
            configuration["webhook"]["certDir"] = str(work / "certs")
            if op is LWS:
                configuration["gangSchedulingManagement"] = {"schedulerProvider": VOLCANO_SCHEDULER}
        (work / "config.json").write_text(json.dumps(configuration, indent=2))
        return [binary, kubeconfig, f"--config={work / 'config.json'}"], env

    def install_trainer_runtime(self) -> None:
        path = self.bin_dir / TORCH_RUNTIME_FILE
        require_binaries(self.bin_dir, (path.name,))
        self.cluster.apply([volcano_torch_runtime(path.read_text())])

    # lifecycle --------------------------------------------------------------------------------

    def stop(self) -> None:
        for supervisor in reversed(list(self.supervisors.values())):
            supervisor.stop()

    def running_pids(self) -> dict[str, int]:
        return {
            name: pid
            for name, supervisor in self.supervisors.items()
            if (pid := supervisor.pid()) is not None
        }

    def log_tail(self, name: str) -> str:
        return self.supervisors[name].log_tail()


def _server(cluster: LocalCluster) -> str:
    """The API server's URL, from the admin kubeconfig (known even to a cluster object made
    from a pid file)."""
    config = json.loads(cluster.kubeconfig.read_text())
    return str(config["clusters"][0]["cluster"]["server"])


def ensure_operators(cluster: LocalCluster, *, bin_dir: Path, log: Callable[[str], None]) -> None:
    """What `fleetplane up` runs after Volcano: the operators, started again unless all of
    them are running."""
    operators = LocalOperators(cluster=cluster, bin_dir=bin_dir, log=log)
    if set(operators.running_pids()) >= set(operators.names):
        return
    operators.stop()
    started = time.monotonic()
    operators.start()
    log(
        f"operators {', '.join(operators.names)} up in {time.monotonic() - started:.1f}s "
        f"(as {', '.join(op.user for op in operators.operators)})"
    )


def stop_operators(cluster: LocalCluster) -> None:
    """What `fleetplane down` runs: stop the operators `up` started (found by their pid file)."""
    LocalOperators(cluster=cluster).stop()
