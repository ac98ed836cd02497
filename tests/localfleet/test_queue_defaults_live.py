"""QueueDefaults against the real parts: a team's plain manifest (naming no queue) is given the
team's Volcano queue at admission, before the gate judges it, and runs in that queue; a wrong
queue is still refused. The real API server (MutatingAdmissionPolicy, served as
admissionregistration.k8s.io/v1 without flags), the real gate (the project's policies in OPA
behind the rendered webhook) and the real Volcano. Here, beside the other tests that start the
session's Volcano, so that the controller's tests before them run without it, as they expect."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from fleet.config import FleetConfig
from localfleet.scenario import A100, H100, _pod_spec, batch_job, deployment
from tests.components.live_gate import create, live_gate, queue_defaults

QUEUE = "scheduling.volcano.sh/queue-name"


def serving_fleet(fleet: FleetConfig) -> FleetConfig:
    """The test fleet with team vt-beta serving inference as a production team does: outside
    its budget (inference has no default runtime, so its cost has no bound otherwise)."""
    teams = [
        t.model_copy(update={"budget_exempt_types": ["inference"]}) if t.name == "vt-beta" else t
        for t in fleet.teams
    ]
    return fleet.model_copy(update={"teams": teams})


def _template_annotations(obj: dict[str, Any]) -> dict[str, str]:
    spec = obj["spec"]
    if obj["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return dict(spec["template"]["metadata"].get("annotations") or {})


@pytest.mark.integration
def test_a_plain_gpu_deployment_runs_in_its_teams_queue(
    kube: Any, volcano: Any, tmp_path: Path
) -> None:
    """Team vt-beta's Deployment naming no queue (the scenario's plain manifest) is admitted
    by the gate with the queue filled in, and Volcano schedules its pod in vt-beta's queue;
    the same Deployment naming vt-alpha's queue is refused by the gate; CronJob, Job and Pod
    get the queue too; re-applying the plain manifest (server-side, a new image) keeps it."""
    ns = "vt-beta"
    with (
        queue_defaults(kube, volcano.fleet),
        live_gate(kube, serving_fleet(volcano.fleet), tmp_path),
    ):
        plain = deployment(
            "plain-infer",
            ns,
            "inference",
            1,
            _pod_spec(1, H100, "fleetplane-inference"),
            plain=True,
        )
        assert QUEUE not in json.dumps(plain)
        admitted = create(kube, plain)
        assert admitted.returncode == 0, admitted.stderr
        created = json.loads(admitted.stdout)
        assert _template_annotations(created)[QUEUE] == "vt-beta"
        assert created["spec"]["template"]["spec"]["schedulerName"] == "volcano"

        def placed() -> dict[str, Any] | None:
            pods = kube.get_json("pods", "-n", ns, "-l", "app=plain-infer")["items"]
            running = [p for p in pods if p.get("spec", {}).get("nodeName")]
            return running[0] if running else None

        deadline = time.monotonic() + 60
        while (pod := placed()) is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert pod is not None, kube.kubectl("get", "rs,pods,events", "-n", ns, check=False).stdout
        assert pod["metadata"]["annotations"][QUEUE] == "vt-beta"
        assert pod["spec"]["schedulerName"] == "volcano"
        group = pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
        podgroup = kube.get_json("podgroups.scheduling.volcano.sh", group, "-n", ns)
        assert podgroup["spec"]["queue"] == "vt-beta"

        # Re-applied as the team keeps it (server-side apply drops what the manifest does not
        # hold, the queue among it): the UPDATE gets the queue again and is admitted.
        reapplied = json.loads(json.dumps(plain))
        reapplied["spec"]["template"]["spec"]["containers"][0]["image"] += "-2"
        kube.apply([plain])
        kube.apply([reapplied])
        updated = kube.get_json("deployment", "plain-infer", "-n", ns)
        assert _template_annotations(updated)[QUEUE] == "vt-beta"
        assert updated["spec"]["template"]["spec"]["containers"][0]["image"].endswith("-2")

        wrong = deployment(
            "wrong-queue",
            ns,
            "inference",
            1,
            _pod_spec(1, H100, "fleetplane-inference"),
            plain=True,
        )
        wrong["spec"]["template"]["metadata"]["annotations"] = {QUEUE: "vt-alpha"}
        refused = create(kube, wrong)
        assert refused.returncode != 0
        assert "queue" in refused.stderr and "vt-alpha" in refused.stderr, refused.stderr

        job = batch_job(
            "plain-etl",
            ns,
            _pod_spec(1, A100, "fleetplane-batch", spot=True, restart="Never"),
            plain=True,
        )
        job_created = create(kube, job)
        assert job_created.returncode == 0, job_created.stderr
        assert _template_annotations(json.loads(job_created.stdout))[QUEUE] == "vt-beta"

        cron = {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {**job["metadata"], "name": "plain-cron"},
            "spec": {
                "schedule": "0 3 * * *",
                "concurrencyPolicy": "Forbid",
                "jobTemplate": {"spec": {**job["spec"]}},
            },
        }
        cron_created = create(kube, cron)
        assert cron_created.returncode == 0, cron_created.stderr
        assert _template_annotations(json.loads(cron_created.stdout))[QUEUE] == "vt-beta"

        bare = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**plain["metadata"], "name": "plain-pod"},
            "spec": _pod_spec(1, H100, "fleetplane-inference"),
        }
        pod_created = create(kube, bare)
        assert pod_created.returncode == 0, pod_created.stderr
        assert json.loads(pod_created.stdout)["metadata"]["annotations"][QUEUE] == "vt-beta"

        # The platform's own namespaces are never touched.
        kube.kubectl("create", "namespace", "monitoring", check=False)
        outside = {**bare, "metadata": {"name": "outside", "namespace": "monitoring"}}
        outside_created = create(kube, outside)
        assert outside_created.returncode == 0, outside_created.stderr
        assert QUEUE not in json.dumps(json.loads(outside_created.stdout)["metadata"])
        kube.kubectl("delete", "pod", "outside", "-n", "monitoring", "--wait=false", check=False)
    for kind, name in (
        ("deployment", "plain-infer"),
        ("job", "plain-etl"),
        ("cronjob", "plain-cron"),
        ("statefulset", "plain-stateful"),
        ("pod", "plain-pod"),
    ):
        kube.kubectl("delete", kind, name, "-n", ns, "--wait=false", check=False)
