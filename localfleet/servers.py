"""The upstream servers of the local fleet (OPA, Prometheus, Pushgateway, Alertmanager), each
defined once: its command line and its readiness probe.

Tests, benchmarks and the replay run them attached, on free loopback ports; `fleetplane up`
runs the very same definitions detached (`localfleet.processes.Supervisor`), on the ports of the
stack's configuration. They are the pinned upstream binaries from tools/bin, stopped with their
process group. Nothing here fakes a server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from fleet.project import policies_dir
from localfleet.binaries import bin_dir as pinned_bin_dir
from localfleet.controlplane import ClusterError, require_binaries
from localfleet.processes import ServerError, Supervisor, free_port, http_ok, proc_stat

__all__ = ["ServerError"]  # raised by every server here; defined beside the supervisor


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a running process so far (Linux /proc), for the benchmarks."""
    fields = proc_stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _request(method: str, url: str, body: Any = None, timeout: float = 10.0) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
    except urllib.error.HTTPError as error:
        raise ServerError(
            f"{method} {url}: HTTP {error.code}: {error.read().decode(errors='replace')}"
        ) from error
    except (urllib.error.URLError, OSError) as error:
        raise ServerError(f"{method} {url}: {error}") from error
    return json.loads(raw) if raw else None


@dataclass(kw_only=True)
class Server:
    """What every server here shares: where its binary, work directory and log are, where it
    listens (`port` 0: a free one, else that port or a ServerError naming its holder), and
    its one supervisor, attached (tests, the replay) or `detached` (`fleetplane up`; a new
    object for the same work directory finds the running process again, to stop it). These
    are keyword-only: a server's own first field stays its first positional argument."""

    NAME: ClassVar[str] = "server"
    bin_dir: Path = field(default_factory=pinned_bin_dir)
    work_dir: Path | None = None
    port: int = 0
    host: str = "127.0.0.1"
    detached: bool = False
    _process: Supervisor | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def address(self) -> str:
        """host:port"""
        return f"{self.host}:{self.port}"

    @property
    def supervisor(self) -> Supervisor:
        if self._process is None:
            if self.work_dir is None:
                self.work_dir = Path(tempfile.mkdtemp(prefix=f"fleetplane-{self.NAME}-"))
            self._process = Supervisor(self.NAME, self.work_dir, detached=self.detached)
        return self._process

    def running_port(self) -> int | None:
        """The port of the running process (detached: as recorded in its work directory)."""
        if self.work_dir is None and self._process is None:
            return None
        return self.supervisor.port()

    def pid(self) -> int | None:
        if self.work_dir is None and self._process is None:
            return None
        return self.supervisor.pid()

    def _serve(
        self,
        command: Callable[[int], list[str]],
        probe_path: str,
        timeout: float,
        *,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = self.supervisor.serve(
            command,
            lambda port: http_ok(f"http://{self.host}:{port}{probe_path}"),
            self.port,
            host=self.host,
            timeout=timeout,
            cwd=cwd,
            env=env,
        )

    def _work(self) -> Path:
        """The work directory (a temporary one unless given), created."""
        work = self.supervisor.work_dir
        work.mkdir(parents=True, exist_ok=True)
        return work

    def stop(self) -> None:
        if self._process is not None or self.work_dir is not None:
            self.supervisor.stop()

    def log_tail(self) -> str:
        if self._process is None:
            return f"--- {self.NAME}: not started"
        return self._process.log_tail()

    def _binaries(self, *names: str) -> dict[str, Path]:
        try:
            return require_binaries(self.bin_dir, names)
        except ClusterError as error:
            raise ServerError(str(error)) from error


@dataclass
class OpaServer(Server):
    """`opa run --server` on loopback with the project's policies (tests excluded) loaded.

    With `tls` (certificate and key files) it also serves HTTPS on `https_host`:`https_port`
    (0: a free port), as the in-cluster Deployment does; plain HTTP on loopback `port` stays
    (readiness, test queries). `data`: files or directories OPA loads at start, as the
    Deployment's volumes. With `authz` (`data.fleetplane.authz`) it requires authentication
    and authorization as the gate's OPA does (`fleet.opa.OPA_AUTH_FLAGS`,
    policies/system/authz.rego): data can then only be loaded at start (`data`), not with
    `put_data`. `env`: added to its environment (the local stack gives the Deployment's GC
    settings, `fleet.opa.OPA_GC_ENV`)."""

    NAME: ClassVar[str] = "opa"
    policies: Path = field(default_factory=policies_dir)
    tls: tuple[Path, Path] | None = None
    https_host: str = "127.0.0.1"
    https_port: int = 0
    data: tuple[Path, ...] = ()
    authz: dict[str, Any] | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def https_url(self) -> str:
        return f"https://{self.https_host}:{self.https_port}"

    def _tls_args(self, https_port: int) -> list[str]:
        if self.tls is None:
            return []
        cert, key = self.tls
        return [
            f"--addr=https://{self.https_host}:{https_port}",
            f"--tls-cert-file={cert}",
            f"--tls-private-key-file={key}",
        ]

    def _authz_args(self) -> list[str]:
        from fleet.opa import AUTHZ_DATA_PATH, OPA_AUTH_FLAGS

        if self.authz is None:
            return []
        assert self.work_dir is not None
        path = self.work_dir / "authz" / AUTHZ_DATA_PATH
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.authz))
        return [*OPA_AUTH_FLAGS, str(self.work_dir / "authz")]

    def start(self, *, timeout: float = 30.0) -> OpaServer:
        from fleet.opa import OPA_RUN_FLAGS  # the flags every OPA of the project gets

        binaries = self._binaries("opa")
        self._work()
        authz = self._authz_args()
        fixed_https = self.https_port
        if self.tls is not None and fixed_https:
            from localfleet.processes import require_port

            require_port("opa (https)", self.https_host, fixed_https)

        def command(port: int) -> list[str]:
            if self.tls is not None and not fixed_https:
                self.https_port = free_port(self.https_host)
            return [
                str(binaries["opa"]),
                "run",
                "--server",
                f"--addr=http://{self.host}:{port}",
                *self._tls_args(self.https_port),
                "--log-level=error",
                "--disable-telemetry",
                *OPA_RUN_FLAGS,
                "--ignore=*_test.rego",
                "--ignore=.*",
                str(self.policies),
                *(str(path) for path in self.data),
                *authz,
            ]

        self._serve(command, "/health", timeout, env=self.env or None)
        return self

    def restart(self) -> OpaServer:
        """Stop and start again on the same port: a new process with an empty store, loaded
        from the files again (what a replica that restarts sees)."""
        self.stop()
        return self.start()

    def put_data(self, path: str, document: Any) -> None:
        _request("PUT", f"{self.url}/v1/data/{path.strip('/')}", document)

    def delete_data(self, path: str) -> None:
        _request("DELETE", f"{self.url}/v1/data/{path.strip('/')}")

    def query(self, path: str, input: Any = None) -> Any:
        """POST /v1/data/<path>; the `result`, or ServerError when the rule is undefined."""
        body = {} if input is None else {"input": input}
        answer = _request("POST", f"{self.url}/v1/data/{path.strip('/')}", body)
        if "result" not in answer:
            raise ServerError(f"data.{path.replace('/', '.')} is undefined for this input")
        return answer["result"]

    def review(self, admission_review: dict[str, Any]) -> dict[str, Any]:
        """POST / with an AdmissionReview: OPA answers with the `system.main` document."""
        return dict(_request("POST", f"{self.url}/", admission_review))

    def __enter__(self) -> OpaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass(frozen=True)
class Sample:
    """One sample of a series: metric name, labels, value, timestamp (epoch seconds)."""

    metric: str
    labels: dict[str, str]
    value: float
    timestamp: float


def openmetrics(samples: Iterable[Sample]) -> str:
    """OpenMetrics text for promtool's backfill: one gauge family per metric, time-ordered."""
    families: dict[str, list[Sample]] = {}
    for sample in samples:
        families.setdefault(sample.metric, []).append(sample)
    lines: list[str] = []
    for metric, items in families.items():
        lines.append(f"# TYPE {metric} gauge")
        for sample in sorted(items, key=lambda s: (sorted(s.labels.items()), s.timestamp)):
            labels = ",".join(
                f'{key}="{_escape(value)}"' for key, value in sorted(sample.labels.items())
            )
            lines.append(f"{metric}{{{labels}}} {sample.value} {sample.timestamp:.3f}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus_config(
    *,
    rule_files: Iterable[Path] = (),
    pushgateway: str | None = None,
    alertmanager: str | None = None,
    interval_seconds: float = 15,
    scrape_configs: Iterable[dict[str, Any]] = (),
) -> str:
    """A Prometheus configuration: its rule files, the Pushgateway scraped with
    `honor_labels` (the pushed `job` label is kept, as the ServiceMonitor of a cloud stack
    does), and where alerts go. Addresses are `host:port`."""
    config: dict[str, Any] = {
        "global": {
            "scrape_interval": f"{interval_seconds:g}s",
            "evaluation_interval": f"{interval_seconds:g}s",
        }
    }
    rules = [str(path) for path in rule_files]
    if rules:
        config["rule_files"] = rules
    if alertmanager:
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
    scrapes = list(scrape_configs)
    if pushgateway:
        scrapes.append(
            {
                "job_name": "pushgateway",
                "honor_labels": True,
                "static_configs": [{"targets": [pushgateway]}],
            }
        )
    if scrapes:
        config["scrape_configs"] = scrapes
    return json.dumps(config, indent=2) + "\n"  # JSON is YAML


@dataclass
class PushgatewayServer(Server):
    """A real Prometheus Pushgateway (`pushgateway` from tools/bin)."""

    NAME: ClassVar[str] = "pushgateway"

    def start(self, *, timeout: float = 30.0) -> PushgatewayServer:
        binaries = self._binaries("pushgateway")
        self._work()
        self._serve(
            lambda port: [
                str(binaries["pushgateway"]),
                f"--web.listen-address={self.host}:{port}",
                "--log.level=warn",
            ],
            "/-/ready",
            timeout,
        )
        return self


def alertmanager_config(webhook_url: str | None, *, wait_seconds: float = 30) -> str:
    """One route to one webhook receiver (None: a receiver that sends nowhere, the alerts are
    only shown by Alertmanager); `wait_seconds` is the group wait and interval (short in tests,
    Alertmanager's defaults of about 30 s otherwise)."""
    return (
        json.dumps(
            {
                "route": {
                    "receiver": "webhook",
                    "group_by": ["alertname", "team"],
                    "group_wait": f"{wait_seconds:g}s",
                    "group_interval": f"{wait_seconds:g}s",
                    "repeat_interval": "4h",
                },
                "receivers": [
                    {"name": "webhook", "webhook_configs": [{"url": webhook_url}]}
                    if webhook_url
                    else {"name": "webhook"}
                ],
            },
            indent=2,
        )
        + "\n"
    )


DEBIAN_ALERTMANAGER_SHARE = Path("/usr/share/prometheus/alertmanager")


def debian_template_launcher(binary: Path) -> list[str]:
    """What to run Debian's `alertmanager` under. Debian's build reads its default
    notification template from DEBIAN_ALERTMANAGER_SHARE instead of embedding it, and stops
    without it. The package is unpacked, not installed: when that file is missing, the unpacked
    package's `usr/share`, which the bootstrap keeps beside the binary (`share/`), is laid over
    /usr/share in a private mount namespace of the alertmanager process only (`unshare -m`, an
    overlay; needs root)."""
    if (DEBIAN_ALERTMANAGER_SHARE / "default.tmpl").exists():
        return []
    share = binary.resolve().parent / "share"
    if not (share / "prometheus" / "alertmanager" / "default.tmpl").exists():
        raise ServerError(
            f"{binary} (Debian's alertmanager) needs {DEBIAN_ALERTMANAGER_SHARE}/default.tmpl "
            "from its package; neither that nor the unpacked package's share/ beside it exists"
        )
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        raise ServerError(
            f"{binary} needs {DEBIAN_ALERTMANAGER_SHARE}/default.tmpl: run as root with "
            "`unshare` (util-linux) to lay the unpacked package's share/ over /usr/share"
        )
    script = 'mount -t overlay overlay -o "lowerdir=$0:/usr/share" /usr/share && exec "$@"'
    return [unshare, "--mount", "--propagation", "private", "sh", "-c", script, str(share)]


@dataclass
class AlertmanagerServer(Server):
    """A real Alertmanager (`alertmanager` from tools/bin), sending every alert to one
    webhook (None: to none; the alerts are only shown by Alertmanager); HA clustering off."""

    NAME: ClassVar[str] = "alertmanager"
    webhook_url: str | None = None
    wait_seconds: float = 30

    def start(self, *, timeout: float = 30.0) -> AlertmanagerServer:
        binaries = self._binaries("alertmanager")
        work = self._work()
        config = work / "alertmanager.yml"
        config.write_text(alertmanager_config(self.webhook_url, wait_seconds=self.wait_seconds))
        storage = work / "data"
        storage.mkdir(parents=True, exist_ok=True)
        launcher = debian_template_launcher(binaries["alertmanager"])
        self._serve(
            lambda port: [
                *launcher,
                str(binaries["alertmanager"]),
                f"--config.file={config}",
                f"--storage.path={storage}",
                f"--web.listen-address={self.host}:{port}",
                "--cluster.listen-address=",
                "--log.level=warn",
            ],
            "/-/ready",
            timeout,
        )
        return self


@dataclass
class PrometheusServer(Server):
    """A real Prometheus whose TSDB was backfilled with the given samples by promtool; with
    `rule_files`, `pushgateway` and `alertmanager` (host:port) it also evaluates the rules,
    scrapes the Pushgateway and sends alerts, every `interval_seconds`; it also scrapes
    `scrape_configs` (e.g. the DCGM exporter stand-in's, `localfleet.dcgm_exporter`).
    `host`: loopback, or the real node's host address, which its pods reach."""

    NAME: ClassVar[str] = "prometheus"
    scrape_configs: list[dict[str, Any]] = field(default_factory=list)
    rule_files: tuple[Path, ...] = ()
    pushgateway: str | None = None
    alertmanager: str | None = None
    interval_seconds: float = 15
    _temp: bool = field(default=False, init=False)

    def start(self, samples: Iterable[Sample] = (), *, timeout: float = 60.0) -> PrometheusServer:
        binaries = self._binaries("prometheus", "promtool")
        self._temp = self.work_dir is None and not self.detached
        work = self._work()
        data = work / "data"
        data.mkdir(parents=True, exist_ok=True)
        samples = list(samples)
        if samples:
            source = work / "backfill.om"
            source.write_text(openmetrics(samples))
            result = subprocess.run(
                [
                    str(binaries["promtool"]),
                    "tsdb",
                    "create-blocks-from",
                    "openmetrics",
                    str(source),
                    str(data),
                ],
                capture_output=True,
                text=True,
            )
            if result.returncode != 0:
                raise ServerError(f"promtool backfill failed:\n{result.stdout}\n{result.stderr}")
        config = work / "prometheus.yml"
        config.write_text(
            prometheus_config(
                rule_files=self.rule_files,
                pushgateway=self.pushgateway,
                alertmanager=self.alertmanager,
                interval_seconds=self.interval_seconds,
                scrape_configs=self.scrape_configs,
            )
        )
        self._serve(
            lambda port: [
                str(binaries["prometheus"]),
                f"--config.file={config}",
                f"--storage.tsdb.path={data}",
                f"--web.listen-address={self.host}:{port}",
                "--storage.tsdb.retention.time=400d",
                "--log.level=warn",
            ],
            "/-/ready",
            timeout,
            cwd=work,
        )
        return self

    def stop(self) -> None:
        super().stop()
        if self._temp and self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """Instant query; the result vector, or ServerError."""
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        answer = _request("GET", f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}")
        if answer.get("status") != "success":
            raise ServerError(f"query {promql!r} failed: {answer}")
        return list(answer["data"]["result"])

    def query_range(
        self, promql: str, start: float, end: float, step: float
    ) -> list[dict[str, Any]]:
        """Range query; the result matrix, or ServerError."""
        params = {
            "query": promql,
            "start": f"{start:.3f}",
            "end": f"{end:.3f}",
            "step": f"{step:g}",
        }
        answer = _request("GET", f"{self.url}/api/v1/query_range?{urllib.parse.urlencode(params)}")
        if answer.get("status") != "success":
            raise ServerError(f"query {promql!r} failed: {answer}")
        return list(answer["data"]["result"])

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts Prometheus holds (pending and firing)."""
        return list(_request("GET", f"{self.url}/api/v1/alerts")["data"]["alerts"])

    def __exit__(self, *exc: object) -> None:
        self.stop()
