"""Every Kubernetes object the components declare, dry-run on the server against the real
local kube-apiserver (with Volcano's CRDs installed by the `kube` fixture, Karpenter's by this
module).

Server-side dry runs persist nothing, so a namespaced object would fail on its namespace not
existing: the namespaces are dry-run first, then those missing are created for this module and
deleted at its end.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.platform import render_manifests
from fleet.config import load_stack_config
from localfleet.binaries import bin_dir
from localfleet.fakenodes import fake_nodes, local_fake_pools
from localfleet.karpenter import CRDS_FILE as KARPENTER_CRDS
from localfleet.operators import install_crd_files

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
FIELD_MANAGER = "fleetplane-dry-run"
STACKS = ("local", "dev", "prod")
# Their CRDs come with kube-prometheus-stack (a chart, not declared here); the rules they carry
# are checked by promtool (tests/observability/test_rules.py).
PROMETHEUS_OPERATOR_KINDS = {"PrometheusRule", "ServiceMonitor"}


def as_yaml(manifests: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(manifests, sort_keys=False)


def dry_run(kube: Any, manifests: list[dict[str, Any]]) -> None:
    kube.kubectl(
        "apply",
        "--server-side",
        "--dry-run=server",
        "--force-conflicts",
        f"--field-manager={FIELD_MANAGER}",
        "-f",
        "-",
        input=as_yaml(manifests),
    )


def stack_manifests(stack: str) -> list[dict[str, Any]]:
    fleet = load_stack_config(REPO_ROOT / "stacks" / f"Pulumi.{stack}.yaml")
    manifests = render_manifests(fleet)  # with throwaway TLS material
    return [m for m in manifests if m["kind"] not in PROMETHEUS_OPERATOR_KINDS]


@pytest.fixture(scope="module")
def stack_namespaces(kube: Any) -> Iterator[None]:
    """Every namespace of every stack, created (if missing) for the dry runs of this module;
    and the pinned Karpenter release's CRDs, for the local stack's NodePool and KWOKNodeClass
    (as `fleetplane up` installs them before `pulumi up`; the Karpenter tests install the same)."""
    install_crd_files(kube, bin_dir(), [KARPENTER_CRDS], "Karpenter's CRDs")
    wanted: dict[str, dict[str, Any]] = {}
    for stack in STACKS:
        for m in stack_manifests(stack):
            if m["kind"] == "Namespace":
                wanted.setdefault(m["metadata"]["name"], m)
            elif m["metadata"].get("namespace"):  # e.g. kube-prometheus-stack's `monitoring`
                name = m["metadata"]["namespace"]
                wanted.setdefault(
                    name, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                )
    existing = set(kube.kubectl("get", "namespaces", "-o", "name").stdout.split())
    missing = [m for name, m in wanted.items() if f"namespace/{name}" not in existing]
    if missing:
        kube.kubectl("create", "-f", "-", input=as_yaml(missing))
    yield
    for m in missing:
        kube.kubectl("delete", "namespace", m["metadata"]["name"], "--wait=false")


@pytest.mark.parametrize("stack", STACKS)
def test_every_declared_object_passes_a_server_side_dry_run(
    kube: Any, stack: str, stack_namespaces: None
) -> None:
    manifests = stack_manifests(stack)
    namespaces = [m for m in manifests if m["kind"] == "Namespace"]
    objects = [m for m in manifests if m["kind"] != "Namespace"]
    assert {m["kind"] for m in objects} >= {"LimitRange", "Queue", "CronJob", "PriorityClass"}
    dry_run(kube, namespaces)
    dry_run(kube, objects)


def test_local_fake_nodes_pass_a_server_side_dry_run(kube: Any) -> None:
    fleet = load_stack_config(REPO_ROOT / "stacks" / "Pulumi.local.yaml")
    nodes = fake_nodes(local_fake_pools(fleet))
    assert len(nodes) == 20
    dry_run(kube, nodes)


def test_dry_run_rejects_what_the_api_server_does_not_know(kube: Any) -> None:
    """The dry runs above have teeth: objects are validated, Volcano queues against the
    release's CRD schema (its weight is an integer; the range is the webhook's to check),
    built-in kinds strictly (unknown fields rejected)."""
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "dry-run-probe"},
        "spec": {"weight": "heavy"},
    }
    with pytest.raises(Exception, match=r"spec\.weight"):
        dry_run(kube, [queue])
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "dry-run-probe", "namespace": "default"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "1"}, "hardd": {}},
    }
    with pytest.raises(Exception, match="hardd"):
        dry_run(kube, [quota])
