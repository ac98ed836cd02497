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
   OPA replica; both complete and their JSON logs are read back;
4. the driver upgrade's validator pod, made by the product's own builder, runs on the real node
   from the validator image by digest (NVML binding inside), finds no NVIDIA driver there and
   says so in its termination message: the controller reads that as `unhealthy` with the
   no-driver reason as soon as the pod ends, not at the validation timeout;
5. remediation's GPU-reset pod, made by the product's builder, runs `fleetplane health reset`
   from the same image on the real node, privileged, against a stand-in `nvidia-smi` (mounted
   from the host) that records what it was asked: persistence off, reset, persistence back.

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
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.nodeflow.nodes import node_view
from controller.nodeflow.pods import Terminated
from controller.nodeflow.settings import WorkflowSettings
from controller.nodeflow.validator import NO_DRIVER, UNHEALTHY, read_verdict, validator_pod
from controller.remediation import states
from controller.remediation.remedy_pods import remedy_pod
from localfleet.controlplane import BIN_DIR, free_port
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
    # the placement service on a port of its own: a main job's stack may be up beside it
    fleet["volcano"]["placement_url"] = f"http://127.0.0.1:{free_port()}"
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

    # 4. the upgrade's validator from its image, on a node without an NVIDIA driver ----------
    validator_says_no_driver(stack, fleet)
    # 5. remediation's GPU reset from the same image, against a stand-in nvidia-smi ----------
    gpu_reset_asks_nvidia_smi(stack, fleet)
    print(f"real-node e2e in {time.monotonic() - started:.0f}s")


VALIDATION_TIMEOUT = 600  # the pod's deadline: the verdict must come long before it


def validator_says_no_driver(stack: LocalStack, fleet: Any) -> None:
    cluster, node = stack.cluster, stack.node()
    image = fleet.upgrade.validator_image
    assert image and "@sha256:" in image, image
    settings = WorkflowSettings(
        validator_image=image,
        validator_namespace=SYSTEM,
        validation_timeout_seconds=VALIDATION_TIMEOUT,
    )
    target, gpus = "550.54.15", 8
    # the real node has no GPU: it is validated as the 8-GPU node whose driver did not come up
    view = replace(node_view(cluster.get_json("node", node.name)), gpu_capacity=gpus)
    pod = validator_pod(view, attempt=1, target=target, settings=settings)
    name = pod["metadata"]["name"]
    begun = time.monotonic()
    statuses, state = run_to_the_end(stack, pod)
    took = time.monotonic() - begun
    print(f"validator pod ended in {took:.0f}s: {state}")
    assert statuses[0]["imageID"].endswith(image.rsplit("@", 1)[1]), statuses[0]
    assert state["exitCode"] != 0, state
    outcome = read_verdict(
        Terminated(
            exit_code=state["exitCode"],
            message=str(state.get("message") or ""),
            reason=str(state.get("reason") or ""),
        ),
        target=target,
        gpus=gpus,
    )
    assert outcome.kind == UNHEALTHY, outcome
    assert NO_DRIVER in outcome.reason and "NVIDIA driver" in outcome.reason, outcome
    assert outcome.summary.get("verdict_reason") == NO_DRIVER, outcome.summary
    cluster.kubectl("delete", "pod", name, "-n", SYSTEM, "--wait=false")


def run_to_the_end(stack: LocalStack, pod: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Create `pod` and wait until its first container has terminated: (statuses, state)."""
    cluster, name = stack.cluster, pod["metadata"]["name"]
    namespace = pod["metadata"]["namespace"]
    created = cluster.kubectl("create", "-f", "-", input=json.dumps(pod), check=False)
    assert created.returncode == 0, created.stderr
    begun = time.monotonic()
    while True:
        raw = cluster.get_json("pod", name, "-n", namespace)
        statuses = raw.get("status", {}).get("containerStatuses") or []
        state = (statuses[0].get("state") or {}).get("terminated") if statuses else None
        if state:
            return statuses, state
        assert time.monotonic() - begun < VALIDATION_TIMEOUT / 2, raw.get("status")
        time.sleep(1)


STANDIN_NVIDIA_SMI = """#!/usr/bin/python3.11
import sys
with open("/standin/calls", "a") as calls:
    calls.write(" ".join(sys.argv[1:]) + "\\n")
if "--query-gpu=persistence_mode" in sys.argv:
    print("Enabled")
elif "--gpu-reset" in sys.argv:
    print("GPU 00000000:00:1E.0 was successfully reset.")
"""


def gpu_reset_asks_nvidia_smi(stack: LocalStack, fleet: Any) -> None:
    cluster, node = stack.cluster, stack.node()
    standin = stack.services_dir / "standin-nvidia-smi"
    standin.mkdir(parents=True, exist_ok=True)
    (standin / "calls").write_text("")
    (standin / "calls").chmod(0o666)
    script = standin / "nvidia-smi"
    script.write_text(STANDIN_NVIDIA_SMI)
    script.chmod(0o755)
    settings = WorkflowSettings(
        validator_image=fleet.upgrade.validator_image, validator_namespace=SYSTEM
    )
    view = replace(node_view(cluster.get_json("node", node.name)), gpu_capacity=8)
    pod = remedy_pod(view, remedy=states.GPU_RESET, attempt=1, gpus=["3"], settings=settings)
    assert pod["spec"]["containers"][0]["securityContext"] == {"privileged": True}
    # the test's only change to the product's pod: nvidia-smi comes from the host's stand-in
    # (on a GPU node the NVIDIA container runtime mounts the driver's own)
    pod["spec"]["volumes"] = [
        {"name": "standin", "hostPath": {"path": str(standin), "type": "Directory"}},
        {"name": "nvidia-smi", "hostPath": {"path": str(script), "type": "File"}},
    ]
    pod["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "standin", "mountPath": "/standin"},
        {"name": "nvidia-smi", "mountPath": "/usr/local/bin/nvidia-smi", "readOnly": True},
    ]
    _, state = run_to_the_end(stack, pod)
    print(f"GPU-reset pod ended: {state}")
    assert state["exitCode"] == 0, state
    result = json.loads(state["message"])
    assert result["ok"] and result["remedy"] == "gpu-reset", result
    assert result["gpus"]["3"]["persistence_mode"] == "enabled", result
    assert result["gpus"]["3"]["persistence_mode_restored"] is True, result
    assert (standin / "calls").read_text().splitlines() == [
        "-i 3 --query-gpu=persistence_mode --format=csv,noheader",
        "-i 3 -pm 0",
        "--gpu-reset -i 3",
        "-i 3 -pm 1",
    ]
    cluster.kubectl("delete", "pod", pod["metadata"]["name"], "-n", SYSTEM, "--wait=false")
