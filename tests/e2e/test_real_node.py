"""The platform in a cluster: the local stack with a real node, from the built images.

`fleetplane image build` builds the controller's and OPA's images; `LocalStack(real_node=True)`
starts the control plane, the KWOK GPU/TPU nodes and one real node (containerd, kubelet,
kube-proxy), pushes the images by digest to the node's registry and runs `pulumi up` of the
local stack configured to use them. Then, in the cluster:

1. OPA runs as its Deployment (both replicas) on the real node from its image by digest, and the
   API server reaches it through its Service: a workload applied as a team member is admitted,
   one that breaks a policy is denied;
2. a controller Job created from the CronJob, with one rule removed from its ClusterRole, fails
   with the API server's message naming the missing permission and changes nothing;
3. with the rule back, two Jobs from the CronJob (the pod runs from its image by digest, as
   the CronJob's ServiceAccount, with in-cluster configuration) act on the KWOK GPU nodes: the
   first warns an idle notebook (Prometheus, on the host, holds DCGM series that say so), the
   second reclaims it (its Deployment scaled to zero); each pushes the spend document to every
   OPA replica; both complete and their JSON logs are read back.

Needs root (network namespaces, cgroups, mounts) and the Pulumi CLI and Kubernetes provider.
"""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from localfleet.controlplane import BIN_DIR
from localfleet.servers import PrometheusServer, Sample
from localfleet.stack import LocalStack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2700), pytest.mark.realnode]

ROOT = Path(__file__).resolve().parents[2]
STACK_FILE = ROOT / "stacks" / "Pulumi.local.yaml"
TOOLS = (
    "pulumi",
    "pulumi-resource-kubernetes",
    "kubelet",
    "kube-proxy",
    "containerd",
    "runc",
    "cni/bridge",
    "iptables/iptables",
    "registry",
    "catatonit",
    "prometheus",
)
SYSTEM = "fleetplane-system"
TEAM_USER = ["--as=alice", "--as-group=ml-research-engineers"]
IDLE_WINDOW = 60  # the notebook's idle window in this test's stack


def training_pod(name: str, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ml-research",
            "labels": {"fleetplane.dev/workload-type": "training"},
            "annotations": {"scheduling.volcano.sh/queue-name": "research"},
        },
        "spec": {
            "priorityClassName": "fleetplane-training",
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "containers": [
                {"name": "main", "image": image, "resources": {"limits": {"nvidia.com/gpu": "8"}}}
            ],
        },
    }


def notebook(name: str) -> dict[str, Any]:
    """A one-GPU notebook of the analytics team on a spot A100 (a KWOK node)."""
    labels = {"fleetplane.dev/workload-type": "notebook", "app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "analytics"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            # a notebook holds its type's maximum of one GPU: replaced, not surged
            "strategy": {"type": "Recreate"},
            "template": {
                # the gate requires a notebook to say when it may be stopped (admission only;
                # the controller's idle rule is the workload type's)
                "metadata": {
                    "labels": labels,
                    "annotations": {
                        "fleetplane.dev/idle-timeout-seconds": "3600",
                        "scheduling.volcano.sh/queue-name": "analytics",
                    },
                },
                "spec": {
                    "priorityClassName": "fleetplane-notebook",
                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
                    "tolerations": [
                        {"key": "nvidia.com/gpu", "operator": "Exists"},
                        {"key": "fleetplane.dev/capacity-type", "operator": "Exists"},
                    ],
                    "containers": [
                        {
                            "name": "main",
                            "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                },
            },
        },
    }


def idle_series(pod: str, node: str, start: float, end: float, scrape_seconds: int) -> list[Sample]:
    """DCGM-shaped series of an idle GPU (as dcgm-exporter labels them), one sample per scrape
    at the interval the stack tells the controller to expect (fewer is partial evidence)."""
    labels = {"namespace": "analytics", "pod": pod, "Hostname": node, "gpu": "0"}
    samples, t = [], start
    while t <= end:
        samples.append(Sample("DCGM_FI_DEV_GPU_UTIL", labels, 0.0, t))
        samples.append(Sample("DCGM_FI_DEV_FB_USED", labels, 2048.0, t))
        t += scrape_seconds
    return samples


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("images")
    started = time.monotonic()
    built = subprocess.run(
        [sys.executable, "-m", "fleetplane", "image", "build", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    print(f"images built in {time.monotonic() - started:.0f}s")
    return out


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, images: Path) -> Iterator[LocalStack]:
    missing = [name for name in TOOLS if not (BIN_DIR / name).exists()]
    if missing:
        pytest.fail(f"missing tool(s) {', '.join(missing)} in {BIN_DIR}: run `make tools`")
    state = tmp_path_factory.mktemp("realnode")
    config = yaml.safe_load(STACK_FILE.read_text())
    settings = config["config"]
    settings["fleetplane:kubeconfig"] = str(state / "local" / "kubeconfig")
    fleet = settings["fleetplane:fleet"]
    # a Job's deadline is the period: leave a loaded machine time to pull and start Python
    fleet["controller"]["period_seconds"] = 300
    fleet["workload_types"]["notebook"]["idle"] = {
        "util_threshold_percent": 1,
        "window_seconds": IDLE_WINDOW,
        "grace_seconds": 0,
    }
    config_file = state / "Pulumi.local.yaml"
    config_file.write_text(yaml.safe_dump(config, sort_keys=False))
    local = LocalStack(
        state_dir=state, config_file=config_file, log=print, real_node=True, images_dir=images
    )
    try:
        yield local
    finally:
        started = time.monotonic()
        local.down()
        print(f"down in {time.monotonic() - started:.0f}s")


def opa_replicas(stack: LocalStack) -> list[dict[str, Any]]:
    return stack.cluster.get_json(
        "pods", "-n", SYSTEM, "-l", "app.kubernetes.io/name=fleetplane-opa"
    )["items"]


def spend_at(pod_ip: str, ca_file: Path, token: str | None) -> Any:
    """`data.fleetplane.spend` of one OPA replica, at its pod address (the host routes the pod
    range into the node), read with `token` (OPA answers data reads to the controller's token
    only); the HTTP status and the result."""
    context = ssl.create_default_context(cafile=str(ca_file))
    context.check_hostname = False  # the certificate names the Service, we call the pod
    connection = http.client.HTTPSConnection(pod_ip, 8443, context=context, timeout=10)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    connection.request("GET", "/v1/data/fleetplane/spend", headers=headers)
    response = connection.getresponse()
    return response.status, json.loads(response.read() or b"{}").get("result")


def events(logs: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    assert lines, logs[-2000:]
    return lines


def snapshot(stack: LocalStack) -> dict[str, Any]:
    """What a controller pass may change: the notebook's objects and the team namespaces."""
    cluster = stack.cluster
    deployment = cluster.get_json("deployment", "nb", "-n", "analytics")
    pods = cluster.get_json("pods", "-n", "analytics", "-l", "app=nb")["items"]
    namespaces = cluster.get_json("namespaces", "-l", "fleetplane.dev/team")["items"]
    return {
        "deployment": (deployment["spec"]["replicas"], deployment["metadata"].get("annotations")),
        "pods": [(p["metadata"]["name"], p["metadata"].get("annotations")) for p in pods],
        "namespaces": {n["metadata"]["name"]: n["metadata"].get("annotations") for n in namespaces},
    }


def test_the_platform_runs_in_the_cluster_on_a_real_node(stack: LocalStack) -> None:
    started = time.monotonic()
    summary = stack.up(controller=False)
    print(summary)
    print(f"up with a real node (cluster, node, images, pulumi up, OPA rollout) in "
          f"{time.monotonic() - started:.0f}s")  # fmt: skip
    cluster, fleet, node = stack.cluster, stack.fleet(), stack.node()
    opa_digest = fleet.opa.image.rsplit("@", 1)[1]
    controller_digest = fleet.controller.image.rsplit("@", 1)[1]

    # 1. OPA on the real node, reached by the API server through its Service ----------------
    replicas = opa_replicas(stack)
    assert len(replicas) == 2
    for pod in replicas:
        assert pod["spec"]["nodeName"] == node.name
        assert pod["status"]["phase"] == "Running"
        (status,) = pod["status"]["containerStatuses"]
        assert status["ready"] and status["imageID"].endswith(opa_digest), status
    webhook = cluster.get_json("validatingwebhookconfiguration", "fleetplane-opa")
    (hook,) = webhook["webhooks"]
    assert hook["clientConfig"]["service"]["name"] == "fleetplane-opa"
    assert "url" not in hook["clientConfig"]
    admitted = cluster.kubectl(
        *TEAM_USER, "apply", "-f", "-", check=False,
        input=json.dumps(training_pod("train-ok", "nvcr.io/nvidia/pytorch:24.05-py3")),
    )  # fmt: skip
    assert admitted.returncode == 0, admitted.stderr
    denied = cluster.kubectl(
        *TEAM_USER, "apply", "-f", "-", check=False,
        input=json.dumps(training_pod("train-denied", "docker.io/library/busybox:1.36")),
    )  # fmt: skip
    assert 'admission webhook "admission.fleetplane.dev" denied the request' in denied.stderr
    assert "docker.io/library/busybox" in denied.stderr, denied.stderr
    cluster.kubectl("delete", "pod", "train-ok", "-n", "ml-research", "--wait=false")

    # an idle notebook on a KWOK GPU node, and Prometheus (on the host) saying so ------------
    created = cluster.kubectl("apply", "-f", "-", input=json.dumps(notebook("nb")), check=False)
    assert created.returncode == 0, created.stderr
    deadline = time.monotonic() + 120
    while True:
        pods = cluster.get_json("pods", "-n", "analytics", "-l", "app=nb")["items"]
        if pods and pods[0]["status"].get("phase") == "Running":
            break
        assert time.monotonic() < deadline, pods
        time.sleep(1)
    nb_pod, nb_node = pods[0]["metadata"]["name"], pods[0]["spec"]["nodeName"]
    assert nb_node.startswith("a100-spot-")
    stack.prometheus.stop()  # the empty one `up` started: this one holds the evidence
    host, port = fleet.controller.prometheus_url.removeprefix("http://").split(":")
    now = time.time()
    prometheus = PrometheusServer(
        work_dir=stack.services_dir / "evidence", host=host, port=int(port)
    )
    scrape = fleet.gpu_operator.dcgm_scrape_interval_seconds
    prometheus.start(idle_series(nb_pod, nb_node, now - 600, now + 3600, scrape))
    try:
        # the notebook must have run for the idle window before it can be judged idle
        time.sleep(max(0.0, IDLE_WINDOW + 5 - (time.time() - now)))

        # 2. one permission missing: the pass fails naming it, and changes nothing ----------
        role = cluster.get_json("clusterrole", "fleetplane-controller")
        (nodes_rule,) = [r for r in role["rules"] if r.get("resources") == ["nodes"]]
        cut = [r for r in role["rules"] if r is not nodes_rule]
        cluster.kubectl(
            "patch", "clusterrole", "fleetplane-controller", "--type=merge",
            "-p", json.dumps({"rules": cut}),
        )  # fmt: skip
        before = snapshot(stack)
        exit_code, logs = stack.controller_job("pass-without-nodes")
        print(logs)
        assert exit_code == 1
        assert 'cannot list resource \\"nodes\\"' in logs or 'cannot list resource "nodes"' in logs
        assert snapshot(stack) == before
        cluster.kubectl(
            "patch", "clusterrole", "fleetplane-controller", "--type=merge",
            "-p", json.dumps({"rules": role["rules"]}),
        )  # fmt: skip

        # 3. the passes the CronJob runs: warn, then reclaim; spend to every OPA replica ----
        timings = {}
        for name in ("pass-warn", "pass-reclaim"):
            begun = time.monotonic()
            exit_code, logs = stack.controller_job(name)
            timings[name] = time.monotonic() - begun
            print(logs)
            assert exit_code == 0, logs[-3000:]
            lines = events(logs)
            assert all({"ts", "level", "event"} <= set(line) for line in lines)
            (job_pod,) = cluster.get_json("pods", "-n", SYSTEM, "-l", f"job-name={name}")["items"]
            assert job_pod["spec"]["nodeName"] == node.name
            assert job_pod["spec"]["serviceAccountName"] == "fleetplane-controller"
            assert job_pod["spec"]["containers"][0]["image"] == fleet.controller.image
            (status,) = job_pod["status"]["containerStatuses"]
            assert status["imageID"].endswith(controller_digest), status
            assert status["state"]["terminated"]["exitCode"] == 0
            ca_file = stack.services_dir / "opa-ca.crt"
            ca_file.write_text(
                cluster.get_json("configmap", "fleetplane-opa-ca", "-n", SYSTEM)["data"]["ca.crt"]
            )
            token = stack.controller_token().read_text().strip()
            for replica in opa_replicas(stack):
                status, spend = spend_at(replica["status"]["podIP"], ca_file, token)
                assert status == 200 and set(spend) == {"research", "serving", "analytics"}, spend
                # without the controller's token, OPA's authorization refuses the read
                assert spend_at(replica["status"]["podIP"], ca_file, None)[0] == 401
        print("controller passes in the cluster: " + ", ".join(
            f"{name} {seconds:.0f}s" for name, seconds in timings.items()))  # fmt: skip

        pods = cluster.get_json("pods", "-n", "analytics", "-l", "app=nb")["items"]
        deployment = cluster.get_json("deployment", "nb", "-n", "analytics")
        assert deployment["spec"]["replicas"] == 0
        assert deployment["metadata"]["annotations"]["fleetplane.dev/reclaimed-replicas"] == "1"
    finally:
        prometheus.stop()
    print(f"real-node e2e in {time.monotonic() - started:.0f}s")
