"""Session fixtures that start the real parts: the local control plane (etcd, kube-apiserver,
controller-manager, scheduler, kwok), an OPA server with the project's policies, and Prometheus
servers backfilled with the series a test writes.

A missing tool fails the test with the bootstrap hint; nothing is skipped. When a test that used
a server fails, the tail of that server's log is attached to the report. A test that starts a
pinned tool carries the `integration` (or `e2e`) marker, so that `make test-fast` runs on a
machine with no tools obtained: an unmarked test that starts one fails, naming it, even where
the tools are there.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from localfleet.binaries import BIN_DIR, bin_dir
from localfleet.controlplane import LocalCluster
from localfleet.fakenodes import default_pools, fake_nodes
from localfleet.servers import OpaServer, PrometheusServer, Sample
from localfleet.volcano import install_volcano_crds

ROOT = Path(__file__).resolve().parent.parent

# Servers whose logs are attached to a failing test's report, by fixture name.
_LOG_SOURCES: dict[str, Callable[[], str]] = {}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed and call.when in ("setup", "call"):
        used = getattr(item, "fixturenames", ())
        for name, tail in _LOG_SOURCES.items():
            if name in used:
                report.sections.append((f"{name} log", tail()))
    return report


SERVER_MARKERS = ("integration", "e2e")
"""A test marked with one of these may start the pinned tools; `make test-fast` leaves them out."""

# The test running now when it carries none of SERVER_MARKERS (set during its setup and call).
_unmarked_test: str | None = None


def _pinned_tool(program: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> bool:
    """Whether a program lies in the pinned tools' folder (as given: tools/bin holds links into
    the per-user cache, so the path is not resolved)."""
    path = os.path.abspath(os.fsdecode(program))
    folders = {os.path.abspath(BIN_DIR), os.path.abspath(bin_dir())}
    return any(path.startswith(folder + os.sep) for folder in folders)


def _refuse_tools_in_unmarked_tests(event: str, args: tuple[Any, ...]) -> None:
    # An audit hook sees every process Python starts (subprocess, asyncio), from any thread,
    # whichever module builds the command line; it cannot be removed, hence the flag.
    if event != "subprocess.Popen" or _unmarked_test is None:
        return
    executable, argv = args[0], args[1]
    if executable is None:
        executable = argv if isinstance(argv, str | bytes | os.PathLike) else argv[0]
    if _pinned_tool(executable):
        pytest.fail(
            f"{_unmarked_test} starts {os.fsdecode(executable)} without the integration marker "
            "(make test-fast must pass with no tools obtained): mark it "
            "@pytest.mark.integration",
            pytrace=False,
        )


sys.addaudithook(_refuse_tools_in_unmarked_tests)


@contextmanager
def _tools_refused_unless_marked(item: pytest.Item) -> Iterator[None]:
    global _unmarked_test
    marked = any(item.get_closest_marker(name) for name in SERVER_MARKERS)
    _unmarked_test = None if marked else item.nodeid
    try:
        yield
    finally:
        _unmarked_test = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    with _tools_refused_unless_marked(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    with _tools_refused_unless_marked(item):
        return (yield)


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The local control plane with the default fake fleet (16 GPU nodes, 4 TPU hosts) and
    the pinned Volcano release's CRDs installed (its processes: the `volcano` fixture)."""
    cluster = LocalCluster(data_dir=tmp_path_factory.mktemp("cluster"))
    cluster.start()
    _LOG_SOURCES["kube"] = lambda: "\n".join(cluster.log_tail(name) for name in cluster.processes)
    try:
        cluster.create_nodes(fake_nodes(default_pools()))
        install_volcano_crds(cluster)
        yield cluster
    finally:
        _LOG_SOURCES.pop("kube", None)
        cluster.stop()


@pytest.fixture
def namespace(kube: LocalCluster) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards (without waiting)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    kube.kubectl("create", "namespace", name)
    kube.wait_until(
        f"default ServiceAccount in {name}",
        lambda: kube.kubectl("get", "sa", "default", "-n", name, check=False).returncode == 0,
        time.monotonic() + 30,
    )
    yield name
    kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="session")
def opa_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpaServer]:
    """`opa run --server` with every policy under policies/ (tests excluded); no data loaded."""
    server = OpaServer(work_dir=tmp_path_factory.mktemp("opa"))
    server.start()
    _LOG_SOURCES["opa_server"] = server.log_tail
    try:
        yield server
    finally:
        _LOG_SOURCES.pop("opa_server", None)
        server.stop()


@pytest.fixture
def prometheus_factory(tmp_path: Path) -> Iterator[Callable[[Iterable[Sample]], PrometheusServer]]:
    """Start a Prometheus whose TSDB holds exactly the given samples (backfilled by promtool)."""
    started: list[PrometheusServer] = []

    def start(samples: Iterable[Sample]) -> PrometheusServer:
        server = PrometheusServer(work_dir=tmp_path / f"prometheus-{len(started)}")
        started.append(server)
        _LOG_SOURCES["prometheus_factory"] = server.log_tail
        return server.start(samples)

    yield start
    _LOG_SOURCES.pop("prometheus_factory", None)
    for server in started:
        server.stop()


VOLCANO_TEAMS = [
    # a team of two namespaces: one queue, one limit across both
    {
        "name": "vt-alpha",
        "namespaces": ["vt-alpha-a", "vt-alpha-b"],
        "monthly_budget_usd": 1000,
        "quota": {"nvidia.com/gpu": 8},
    },
    # a guarantee: Volcano's queue webhook checks it against `deserved`
    {
        "name": "vt-beta",
        "monthly_budget_usd": 1000,
        "quota": {"nvidia.com/gpu": 16},
        "guaranteed": {"nvidia.com/gpu": 4},
    },
]


@pytest.fixture(scope="session")
def volcano(kube: LocalCluster) -> Iterator[Any]:
    """The pinned Volcano release running on `kube` (webhooks, controllers, scheduler),
    configured as the chart is from a fleet of the local stack's pools with two test teams
    (`VOLCANO_TEAMS`), whose namespaces, queues and priority classes are created, and
    `placement: volcano`."""
    from components.tenancy import priority_classes, team_manifests
    from components.volcano import volcano_queues
    from fleet.config import load_stack_config, parse_fleet
    from fleet.project import stack_file as project_stack_file
    from localfleet.volcano import LocalVolcano

    local = load_stack_config(project_stack_file("local"))
    raw = local.model_dump(mode="json", exclude_none=True)
    raw["teams"] = VOLCANO_TEAMS
    raw.pop("approvals", None)  # granted to the local stack's teams, which these replace
    # Volcano's own scores, by name: the local stack defaults to fgd (its loopback placement
    # service), which no test session runs; a test of the service adds it with its own.
    raw["volcano"] = {**raw.get("volcano", {}), "placement": "volcano"}
    raw["volcano"].pop("placement_url", None)
    fleet = parse_fleet(raw)
    runner = LocalVolcano(cluster=kube, fleet=fleet)
    runner.start()
    _LOG_SOURCES["volcano"] = lambda: "\n".join(
        kube.log_tail(name)
        for name in ("vc-scheduler", "vc-controller-manager", "vc-webhook-manager")
    )
    try:
        objects = [m for team in fleet.teams for m in team_manifests(fleet, team)]
        kube.apply([m for m in objects if m["kind"] == "Namespace"])
        kube.apply([m for m in objects if m["kind"] != "Namespace"])
        existing = {pc["metadata"]["name"] for pc in kube.get_json("priorityclasses")["items"]}
        kube.apply([pc for pc in priority_classes(fleet) if pc["metadata"]["name"] not in existing])
        kube.apply(volcano_queues(fleet))
        yield runner
    finally:
        _LOG_SOURCES.pop("volcano", None)
        runner.stop()
