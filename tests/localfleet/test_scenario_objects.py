"""The scenario's objects of the operators' kinds, as written (localfleet.scenario_operators);
their way through the real gate, operators and Volcano is tests/localfleet/
test_scenario_operators.py."""

from __future__ import annotations

import subprocess
from typing import Any

from fleet import labels
from localfleet.controlplane import ClusterError
from localfleet.scenario_operators import (
    platform_runtime,
    platform_runtime_name,
    ray_job,
    submit_operator_work,
    train_job,
)

SPOT = {labels.GPU_PRODUCT: "NVIDIA-A100-SXM4-40GB", labels.CAPACITY_TYPE: "spot"}
RELEASE = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "torch-distributed", "uid": "u", "resourceVersion": "3"},
    "spec": {
        "podGroupPolicy": {"volcano": {}},
        "template": {
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {
                            "spec": {"template": {"spec": {"containers": [{"name": "node"}]}}}
                        },
                    }
                ]
            }
        },
    },
}


def test_the_platform_runtime_names_its_priority_class_in_name_and_pods() -> None:
    runtime = platform_runtime(RELEASE, "fleetplane-training")
    assert runtime["metadata"]["name"] == "torch-distributed.fleetplane-training"
    assert platform_runtime_name("fleetplane-training") == runtime["metadata"]["name"]
    assert "uid" not in runtime["metadata"] and "resourceVersion" not in runtime["metadata"]
    [job] = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert job["template"]["spec"]["template"]["spec"]["priorityClassName"] == "fleetplane-training"
    assert runtime["spec"]["podGroupPolicy"] == {"volcano": {}}
    assert "priorityClassName" not in str(RELEASE)  # the release's runtime is left as it was


def common() -> dict[str, Any]:
    return {"node_selector": SPOT, "scenario_labels": {"s": "up"}, "tolerations": [{"key": "t"}]}


def test_a_trainjob_states_what_the_gate_counts() -> None:
    job = train_job("tj", "ml", "research", runtime="rt.pc", nodes=2, gpus=1, **common())
    trainer = job["spec"]["trainer"]
    assert trainer["numNodes"] == 2
    assert trainer["resourcesPerNode"]["limits"] == {labels.GPU_RESOURCE: "1"}
    [override] = job["spec"]["podTemplateOverrides"]
    assert override["targetJobs"] == [{"name": "node"}]
    assert override["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "research"
    assert labels.CHECKPOINT_LOCATION in override["metadata"]["annotations"]
    assert override["metadata"]["labels"][labels.WORKLOAD_TYPE] == "training"


def test_a_rayjob_can_be_suspended_and_only_gpu_pods_tolerate_gpu_nodes() -> None:
    job = ray_job("rj", "ml", "research", workers=1, gpus=1, priority_class="pc", **common())
    spec = job["spec"]
    assert spec["shutdownAfterJobFinishes"] is True  # KubeRay suspends only such a RayJob
    assert job["metadata"]["labels"]["ray.io/priority-class-name"] == "pc"
    assert job["metadata"]["labels"]["volcano.sh/queue-name"] == "research"
    [group] = spec["rayClusterSpec"]["workerGroupSpecs"]
    assert group["minReplicas"] == group["maxReplicas"] == group["replicas"] == 1
    for template in (spec["rayClusterSpec"]["headGroupSpec"]["template"], group["template"]):
        assert template["spec"]["tolerations"] == [{"key": "t"}]
        assert template["spec"]["priorityClassName"] == "pc"
    # the submitter is a container of the head pod (the local fleet has no CPU node for a
    # submitter pod of its own): no template of its own, and nothing KubeRay refuses with it
    assert spec["submissionMode"] == "SidecarMode"
    assert "submitterPodTemplate" not in spec and "submitterConfig" not in spec
    assert (
        spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"].get("restartPolicy", "Never")
        == "Never"
    )


class RefusingCluster:
    """get_json answers the release's runtime; every kubectl apply of a workload is refused."""

    def __init__(self) -> None:
        self.applied: list[Any] = []

    def get_json(self, *args: str) -> dict[str, Any]:
        return RELEASE

    def apply(self, objects: list[Any]) -> None:
        self.applied += objects

    def kubectl(self, *args: str, input: str = "", check: bool = True) -> Any:
        return subprocess.CompletedProcess(
            args, 1, "", 'Error from server: admission webhook "x" denied the request: queue: no'
        )


def test_a_refusal_is_reported_and_the_scenario_goes_on() -> None:
    cluster = RefusingCluster()
    refused = submit_operator_work(
        cluster,  # type: ignore[arg-type]
        namespace="ml",
        queue="research",
        priority_class="pc",
        **common(),
    )
    assert refused == [
        ("UNEXPECTED: the TrainJob tj-finetune", "queue: no"),
        ("UNEXPECTED: the RayJob rj-eval", "queue: no"),
    ]
    assert [o["metadata"]["name"] for o in cluster.applied] == ["torch-distributed.pc"]


class NoOperators(RefusingCluster):
    def get_json(self, *args: str) -> dict[str, Any]:
        raise ClusterError(
            "kubectl get clustertrainingruntime: the server doesn't have a resource type"
        )


def test_without_the_operators_the_scenario_goes_on() -> None:
    cluster = NoOperators()
    refused = submit_operator_work(
        cluster,  # type: ignore[arg-type]
        namespace="ml",
        queue="research",
        priority_class="pc",
        **common(),
    )
    [(what, message)] = refused
    assert what == "UNEXPECTED: the platform's training runtime"
    assert "resource type" in message
    assert cluster.applied == []
