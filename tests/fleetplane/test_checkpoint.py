"""fleetplane.checkpoint: what it writes is what the drains read; on the real API server and
gate, a team's ServiceAccount records a checkpoint on its running pod and nothing else it may
not write."""

from __future__ import annotations

import ast
import json
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from controller.decide.workloads import annotation_number
from controller.nodeflow.pods import checkpoint_at, pod_view
from fleet import labels
from fleetplane import checkpoint
from fleetplane.checkpoint import CheckpointError, InCluster, merge_patch, record
from tests.controller.builders import a_pod

ROOT = Path(__file__).resolve().parents[2]


def test_the_helper_uses_the_standard_library_only() -> None:
    tree = ast.parse(Path(checkpoint.__file__).read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }
    assert imported - {"__future__"} <= set(sys.stdlib_module_names), imported


class NoDriver:
    """A driver selector that selects nothing: the pod is a workload."""

    def matches(self, labels: dict[str, str]) -> bool:
        return False


def test_the_drains_read_what_the_helper_writes() -> None:
    """The merge patch sets exactly the annotation the controller's drains read, in the
    format they trust: preemption (annotation_number) and the node workflows (checkpoint_at)."""
    at = time.time() - 120
    patch = json.loads(merge_patch(at))
    assert patch == {"metadata": {"annotations": {labels.LAST_CHECKPOINT: str(int(at))}}}
    assert checkpoint.ANNOTATION == labels.LAST_CHECKPOINT
    value = patch["metadata"]["annotations"][labels.LAST_CHECKPOINT]
    pod = a_pod("trainer-0").annotate(labels.LAST_CHECKPOINT, value).build()
    assert annotation_number(pod, labels.LAST_CHECKPOINT) == int(at)
    raw = {
        "metadata": {
            "name": "trainer-0",
            "namespace": "ml",
            "annotations": {**patch["metadata"]["annotations"]},
        },
        "spec": {"containers": [{"name": "main"}]},
        "status": {"phase": "Running"},
    }
    view = pod_view(raw, driver_namespace="gpu-operator", driver_selector=NoDriver())
    assert checkpoint_at(view, time.time()) == int(at)


def test_without_the_downward_api_it_says_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("POD_NAME", "POD_NAMESPACE", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(CheckpointError, match="POD_NAME"):
        InCluster.from_environment(tmp_path)


def test_the_command_fails_with_status_2_outside_a_pod(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "fleetplane", "checkpoint"],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "POD_NAME" in result.stderr


@pytest.mark.integration
def test_a_team_service_account_records_a_checkpoint_and_nothing_else(
    kube: Any, volcano: Any, tmp_path: Path
) -> None:
    """As team vt-beta's default ServiceAccount (bound by the tenancy component's Role), the
    helper records a checkpoint on a running pod through the real gate; the same identity
    changing a platform-owned key of the pod is refused by the gate, and RBAC gives it nothing
    but patch (no get, no delete, not in another team's namespace)."""
    from localfleet.scenario import H100, _pod_spec, deployment
    from tests.components.live_gate import create, live_gate, queue_defaults
    from tests.localfleet.test_queue_defaults_live import serving_fleet

    ns = "vt-beta"
    with (
        queue_defaults(kube, volcano.fleet),
        live_gate(kube, serving_fleet(volcano.fleet), tmp_path),
    ):
        spec = _pod_spec(1, H100, "fleetplane-inference")
        metadata = deployment("trainer", ns, "inference", 1, spec, plain=True)["metadata"]
        created = create(
            kube,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {**metadata, "name": "trainer-0"},
                "spec": spec,
            },
        )
        assert created.returncode == 0, created.stderr
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            phase = kube.get_json("pod", "trainer-0", "-n", ns).get("status", {}).get("phase")
            if phase == "Running":
                break
            time.sleep(0.5)
        assert phase == "Running"
        token = kube.kubectl("create", "token", "default", "-n", ns).stdout.strip()
        where = InCluster(
            server=kube.server,
            token=token,
            ca_file=str(kube.data_dir / "pki" / "ca.crt"),
            namespace=ns,
            pod="trainer-0",
        )
        at = time.time() - 5
        assert record(at, where=where) == str(int(at))
        annotations = kube.get_json("pod", "trainer-0", "-n", ns)["metadata"]["annotations"]
        assert annotations[labels.LAST_CHECKPOINT] == str(int(at))

        def as_team(
            method: str, body: dict[str, Any] | None = None, namespace: str = ns
        ) -> tuple[int, str]:
            """The API server's answer to the team's ServiceAccount (its status and message)."""
            request = urllib.request.Request(
                f"{kube.server}/api/v1/namespaces/{namespace}/pods/trainer-0",
                data=None if body is None else json.dumps(body).encode(),
                method=method,
                headers={
                    "Authorization": f"Bearer {token}",
                    "Content-Type": "application/merge-patch+json",
                },
            )
            context = ssl.create_default_context(cafile=where.ca_file)
            try:
                with urllib.request.urlopen(request, context=context, timeout=10) as answer:
                    return answer.status, ""
            except urllib.error.HTTPError as error:
                return error.code, error.read().decode()

        for body in (
            {"metadata": {"annotations": {"fleetplane.dev/reclaim-deadline": "1"}}},
            {"metadata": {"labels": {"fleetplane.dev/exempt": "true"}}},
            {
                "metadata": {
                    "annotations": {
                        labels.LAST_CHECKPOINT: str(int(at) + 1),
                        "fleetplane.dev/preempted-by": "x",
                    }
                }
            },
        ):
            status, message = as_team("PATCH", body)
            assert status == 403 and "platform-owned" in message, (status, message)
        # Nothing else of the pod either (the gate's checkpoint rule): RBAC cannot narrow it.
        for body in (
            {"metadata": {"annotations": {"team.example/step": "500"}}},
            {"metadata": {"labels": {"app": "elsewhere"}}},
            {"spec": {"activeDeadlineSeconds": 60}},
        ):
            status, message = as_team("PATCH", body)
            assert status == 403 and "checkpoint:" in message, (status, message)
        assert as_team("GET")[0] == 403
        assert as_team("DELETE")[0] == 403
        status, _ = as_team(
            "PATCH", {"metadata": {"annotations": {labels.LAST_CHECKPOINT: "1"}}}, "vt-alpha-a"
        )
        assert status == 403
        still = kube.get_json("pod", "trainer-0", "-n", ns)["metadata"]
        assert still["annotations"][labels.LAST_CHECKPOINT] == str(int(at))
        assert "fleetplane.dev/exempt" not in (still.get("labels") or {})
    kube.kubectl("delete", "pod", "trainer-0", "-n", ns, "--wait=false", check=False)
