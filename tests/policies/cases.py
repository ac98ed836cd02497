"""The admission cases: one line per rule and edge, allowed and denied.

The table drives tests/policies/test_admission.py and is rendered as files into
policyreview/corpus/reviews/ (tests/policies/corpus.py), the corpus that
`fleetplane policy diff` and bench/opa_admission.py replay.
"""

from __future__ import annotations

from tests.policies.builders import Workload, batch, cpu, inference, notebook, training
from tests.policies.dra_cases import DRA_CASES
from tests.policies.lifetime_cases import LIFETIME_CASES
from tests.policies.operator_cases import OPERATOR_CASES

DRA_GPU = "deviceclass.resource.kubernetes.io/gpu.nvidia.com"

# (case, workload, rules it violates); an empty set means allowed.
CASES: list[tuple[str, Workload, set[str]]] = [
    # every starting point is valid, whatever object carries it
    ("training pod", training(), set()),
    ("inference deployment", inference().as_deployment(replicas=4), set()),
    ("notebook statefulset", notebook().as_statefulset(), set()),
    ("batch job", batch().as_job(parallelism=4), set()),
    # issue 19: runs of a CronJob that may overlap hold more than one run's accelerators
    ("training cronjob", training().as_cronjob(), {"cronjob-concurrency"}),
    ("training cronjob without overlap", training().as_cronjob("Forbid"), set()),
    ("training volcano job", training().as_volcano_job(("ps", 1), ("worker", 2)), set()),
    ("cpu pod", cpu(), set()),
    # quantities
    ("fractional gpus", training().gpus("1.5"), {"malformed-quantity"}),
    ("negative gpus", training().gpus("-1"), {"malformed-quantity"}),
    ("exponent gpus", training().gpus("1e3"), {"malformed-quantity"}),
    ("hex gpus", training().gpus("0x2"), {"malformed-quantity"}),
    ("word gpus", training().gpus("abc"), {"malformed-quantity"}),
    ("json number gpus", training().gpus(2), set()),
    ("malformed mig", training().limits({"nvidia.com/mig-1g.10gb": "0.5"}), {"malformed-quantity"}),
    ("malformed tpu", training().tpus("4.0"), {"malformed-quantity"}),
    (
        "request without limit",
        training().resources({"requests": {"nvidia.com/gpu": "1"}}),
        {"accelerator-limits"},
    ),
    (
        "request differs from limit",
        training().resources(
            {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}}
        ),
        {"accelerator-limits"},
    ),
    (
        "request equal to limit",
        training().resources(
            {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}
        ),
        set(),
    ),
    # workload type and team
    ("no workload type", training().typed(None), {"workload-type"}),
    ("unknown workload type", training().typed("research"), {"workload-type"}),
    ("accelerators outside a team", training().in_namespace("default"), {"team"}),
    # issue 19: every namespace but the platform's own is judged
    (
        "cpu outside a team",
        cpu().image("ubuntu").privileged().in_namespace("default"),
        {"image-registry", "privileged"},
    ),
    (
        "cpu in a system namespace",
        cpu().image("ubuntu").privileged().in_namespace("kube-system"),
        set(),
    ),
    # accelerator model
    ("no model selected", training().no_model(), {"accelerator-model"}),
    ("model by affinity", training().model("h100-80gb", "a100-40gb"), set()),
    ("model not allowed", training().in_namespace("analytics"), {"accelerator-model"}),
    (
        "affinity admitting a disallowed model",
        training().model("a100-40gb", "h100-80gb").in_namespace("analytics"),
        {"accelerator-model"},
    ),
    (
        "unknown model",
        training().select("nvidia.com/gpu.product", "Tesla-T4"),
        {"accelerator-model"},
    ),
    ("tpu", training().tpus("4"), set()),
    (
        "tpu not allowed for serving",
        inference().tpus("4").in_namespace("ml-serving"),
        {"accelerator-model"},
    ),
    ("mig slices", notebook().limits({"nvidia.com/mig-1g.10gb": "1"}), set()),
    # size
    ("notebook with two gpus", notebook().gpus(2), {"max-accelerators"}),
    (
        "notebook with two mig slices",
        notebook().limits({"nvidia.com/mig-1g.10gb": "2"}),
        {"max-accelerators"},
    ),
    (
        "init container counts",
        notebook().init_container(resources={"limits": {"nvidia.com/gpu": "2"}}),
        {"max-accelerators"},
    ),
    (
        "training over the type limit",
        training().as_deployment(replicas=9),
        {"max-accelerators", "approval"},
    ),
    # issue 30: DRA's implicit extended resource of NVIDIA's GPU DeviceClass is a GPU
    # (it passed the gate unjudged); another class's is refused (lib/dra.rego)
    ("gpus through the dra class", training().limits({DRA_GPU: "8"}), set()),
    ("notebook with two dra gpus", notebook().limits({DRA_GPU: "2"}), {"max-accelerators"}),
    (
        "dra gpus without a model",
        cpu().limits({DRA_GPU: "1"}),
        {"accelerator-model", "workload-type"},
    ),
    (
        "dra gpus needing approval",
        training().limits({DRA_GPU: "8"}).as_job(parallelism=9),
        {"approval", "max-accelerators"},
    ),
    (
        "implicit resource of another device class",
        training().limits(
            {"nvidia.com/gpu": "8", "deviceclass.resource.kubernetes.io/x.example.com": "1"}
        ),
        {"accelerator-access"},
    ),
    ("large training needs approval", training().as_job(parallelism=4), {"approval"}),
    ("large training approved", training().approved().as_job(parallelism=4), set()),
    (
        "large training with an unknown approval",
        training().approved("APR-0000-000").as_job(parallelism=4),
        {"approval"},
    ),
    ("large volcano job", training().as_volcano_job(("worker", 4)), {"approval"}),
    # Volcano queue: Volcano's webhook sets "default" on a job that names none
    ("volcano job in the default queue", training().as_volcano_job().queue("default"), {"queue"}),
    (
        "volcano job in another team's queue",
        training().as_volcano_job().queue("serving"),
        {"queue"},
    ),
    ("cpu volcano job without a queue", cpu().as_volcano_job().queue(""), {"queue"}),
    # Volcano 1.15 puts a pod's PodGroup in "default" unless the pod names its queue
    ("accelerator pod without its queue annotation", training().unqueued(), {"queue"}),
    (
        "accelerator deployment without its queue annotation",
        inference().as_deployment(1).unqueued(),
        {"queue"},
    ),
    ("cpu pod without a queue annotation", cpu(), set()),
    ("node name", training().node_name("gpu-node-1"), {"node-name"}),
    # capacity type
    ("inference tolerating spot", inference().tolerate_spot(), {"capacity-type"}),
    (
        "inference pinned to spot",
        inference().select("karpenter.sh/capacity-type", "spot"),
        {"capacity-type"},
    ),
    ("batch on demand", batch().on_demand(), {"capacity-type"}),
    ("batch only tolerating spot", batch().on_demand().tolerate_spot(), {"capacity-type"}),
    ("training on spot with checkpoint", training().on_spot().checkpoint(), set()),
    # priority class
    ("no priority class", training().priority(None), {"priority-class"}),
    (
        "another type's priority class",
        notebook().priority("fleetplane-training"),
        {"priority-class"},
    ),
    ("second training class", training().priority("fleetplane-training-high"), set()),
    # checkpoint
    ("spot training without checkpoint", training().on_spot(), {"checkpoint"}),
    (
        "spot training with a non-uri checkpoint",
        training().on_spot().checkpoint("later"),
        {"checkpoint"},
    ),
    # idle timeout
    ("notebook without idle timeout", notebook().idle_timeout(None), {"idle-timeout"}),
    ("notebook at the maximum idle timeout", notebook().idle_timeout("14400"), set()),
    ("notebook over the maximum idle timeout", notebook().idle_timeout("14401"), {"idle-timeout"}),
    # images and privileges, for accelerator and cpu pods alike
    ("docker hub image", cpu().image("ubuntu:24.04"), {"image-registry"}),
    ("lookalike registry", cpu().image("nvcr.io.example.com/x"), {"image-registry"}),
    ("init container image", training().init_container(image="busybox"), {"image-registry"}),
    ("privileged", training().privileged(), {"privileged"}),
    ("host network", cpu().host("hostNetwork"), {"host-namespaces"}),
    ("host pid", cpu().host("hostPID"), {"host-namespaces"}),
    ("host ipc", cpu().host("hostIPC"), {"host-namespaces"}),
    ("host path", cpu().host_path(), {"host-path"}),
    # issue 33: devices the device plugin did not grant: the runtime's feature variables
    # mount the node's RDMA, NVSwitch and storage device nodes into a container with GPUs;
    # sidecars and ephemeral containers without a request opt out of devices or get none
    (
        "training pod reaching the rdma network",
        training().env("NVIDIA_MOFED", "enabled"),
        {"accelerator-access"},
    ),
    (
        "sidecar reaching the nvswitch fabric",
        training().sidecar(env=[{"name": "NVIDIA_NVSWITCH", "value": "enabled"}]),
        {"accelerator-access"},
    ),
    (
        "sidecar opting out of devices",
        training().sidecar(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]),
        set(),
    ),
    (
        "ephemeral container asking for the node's gpus",
        training()
        .ephemeral_container(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])
        .updated_from(training())
        .subresource("ephemeralcontainers"),
        {"accelerator-access"},
    ),
    # issue 33: devices held past every end: the grace period is bounded and priced
    ("training pod with a short grace", training().grace(60), set()),
    (
        "training pod holding its gpus an hour past its end",
        training().grace(3600),
        {"termination-grace"},
    ),
    (
        "inference deployment with a long grace",
        inference().grace(600).as_deployment(replicas=2),
        {"termination-grace"},
    ),
    ("cpu pod with a long grace", cpu().grace(3600), set()),
    # issue 33: a probe's own grace replaces the pod's when its container is killed
    (
        "training pod with a short liveness grace",
        training().probe_grace("livenessProbe", 60),
        set(),
    ),
    (
        "training pod with a long liveness grace",
        training().probe_grace("livenessProbe", 3600),
        {"termination-grace"},
    ),
    # issue 33: the platform's maintenance taints keep pods off nodes it drains or repairs
    (
        "training pod tolerating node outages",
        training().tolerate(
            key="node.kubernetes.io/unreachable",
            operator="Exists",
            effect="NoExecute",
            tolerationSeconds=300,
        ),
        set(),
    ),
    (
        "training pod tolerating the cordon",
        training().tolerate(key="node.kubernetes.io/unschedulable", operator="Exists"),
        {"maintenance-toleration"},
    ),
    (
        "training pod tolerating the gpu quarantine",
        training().tolerate(key="fleetplane.dev/gpu-unhealthy", operator="Exists"),
        {"maintenance-toleration"},
    ),
    # issue 34: only the controller lets waiting work onto a burst tier, under the burst policy
    (
        "training pod tolerating the on-demand burst tier",
        training().tolerate(
            key="fleetplane.dev/burst-tier",
            operator="Equal",
            value="on-demand",
            effect="NoSchedule",
        ),
        {"burst-toleration"},
    ),
    (
        "inference deployment tolerating every burst tier",
        inference().tolerate(key="fleetplane.dev/burst-tier", operator="Exists").as_deployment(),
        {"burst-toleration"},
    ),
    (
        "training pod tolerating every taint",
        training().tolerate(operator="Exists"),
        {"maintenance-toleration", "burst-toleration", "checkpoint"},
    ),
    # issue 33: a rollout's surge is held (8 x 8 is the maximum; 2 surge pods go past it)
    (
        "approved training deployment surging past the type limit",
        training().approved().as_deployment(replicas=8),
        {"max-accelerators", "approval"},
    ),
    (
        "approved training deployment recreated at the type limit",
        training().approved().as_deployment(replicas=8, strategy={"type": "Recreate"}),
        set(),
    ),
    # everything at once: one message per violated rule
    (
        "many violations",
        notebook().gpus(2).priority("x").image("ubuntu").host("hostPID"),
        {"max-accelerators", "priority-class", "image-registry", "host-namespaces"},
    ),
]

# The operators' kinds and issue 33's classes 3 and 5 (tests/policies/operator_cases.py).
CASES += OPERATOR_CASES

# Issue 33's disruption budgets, unmodellable preemptors and relabels (lifetime_cases.py).
CASES += LIFETIME_CASES

# Issue 30's DRA claims (tests/policies/dra_cases.py).
CASES += DRA_CASES
