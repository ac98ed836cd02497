"""Well-known label, annotation, taint and resource names.

Defined once here and mirrored in `policies/fleetplane/lib/keys.rego`; the role names in `KEYS`
are the keys of the Rego `keys` object, so a test can compare both documents entry by entry.
"""

from __future__ import annotations

from typing import Final

# Workload labels and annotations (set by users, read by OPA and the controller).
WORKLOAD_TYPE: Final = "fleetplane.dev/workload-type"
EXEMPT: Final = "fleetplane.dev/exempt"
PREEMPTIBLE: Final = "fleetplane.dev/preemptible"
CHECKPOINT_LOCATION: Final = "fleetplane.dev/checkpoint-location"
LAST_CHECKPOINT: Final = "fleetplane.dev/last-checkpoint"
IDLE_TIMEOUT_SECONDS: Final = "fleetplane.dev/idle-timeout-seconds"
APPROVAL_ID: Final = "fleetplane.dev/approval-id"
CHECKPOINT_INTERVAL_SECONDS: Final = "fleetplane.dev/checkpoint-interval-seconds"
STRAGGLER_ACTION: Final = "fleetplane.dev/straggler-action"  # label: "restart" opts in

# Annotations written by the controller.
IDLE_WARNED_AT: Final = "fleetplane.dev/idle-warned-at"
RECLAIM_DEADLINE: Final = "fleetplane.dev/reclaim-deadline"
RUNTIME_WARNED_AT: Final = "fleetplane.dev/runtime-warned-at"
STOP_DEADLINE: Final = "fleetplane.dev/stop-deadline"
ORPHAN_FOUND_AT: Final = "fleetplane.dev/orphan-found-at"
STRAGGLER_REPORTED_AT: Final = "fleetplane.dev/straggler-reported-at"

# Node labels.
POOL: Final = "fleetplane.dev/pool"
CAPACITY_TYPE: Final = "fleetplane.dev/capacity-type"
GPU_PRODUCT: Final = "nvidia.com/gpu.product"
TPU_ACCELERATOR: Final = "cloud.google.com/gke-tpu-accelerator"
TPU_TOPOLOGY: Final = "cloud.google.com/gke-tpu-topology"

# Namespace label that marks a team namespace; the admission webhook is scoped by it.
TEAM: Final = "fleetplane.dev/team"
# Common label on every object the platform declares.
MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE: Final = "fleetplane"

# Labels the GPU Operator (GPU Feature Discovery) and the clouds put on nodes.
GPU_PRESENT: Final = "nvidia.com/gpu.present"
GPU_COUNT: Final = "nvidia.com/gpu.count"
GPU_MEMORY: Final = "nvidia.com/gpu.memory"
GPU_FAMILY: Final = "nvidia.com/gpu.family"
GPU_REPLICAS: Final = "nvidia.com/gpu.replicas"
GPU_SHARING_STRATEGY: Final = "nvidia.com/gpu.sharing-strategy"
MIG_CAPABLE: Final = "nvidia.com/mig.capable"
MIG_CONFIG: Final = "nvidia.com/mig.config"
DEVICE_PLUGIN_CONFIG: Final = "nvidia.com/device-plugin.config"
CUDA_DRIVER_MAJOR: Final = "nvidia.com/cuda.driver.major"
CUDA_DRIVER_MINOR: Final = "nvidia.com/cuda.driver.minor"
CUDA_DRIVER_REV: Final = "nvidia.com/cuda.driver.rev"
DEPLOY_DRIVER: Final = "nvidia.com/gpu.deploy.driver"
INSTANCE_TYPE: Final = "node.kubernetes.io/instance-type"
GKE_NODEPOOL: Final = "cloud.google.com/gke-nodepool"
GKE_ACCELERATOR: Final = "cloud.google.com/gke-accelerator"
GKE_SPOT: Final = "cloud.google.com/gke-spot"
EKS_NODEGROUP: Final = "eks.amazonaws.com/nodegroup"
EKS_CAPACITY_TYPE: Final = "eks.amazonaws.com/capacityType"
KARPENTER_CAPACITY_TYPE: Final = "karpenter.sh/capacity-type"

# Volcano: the namespace annotation naming the team's default queue.
VOLCANO_QUEUE_NAME: Final = "scheduling.volcano.sh/queue-name"

# Extended resources.
GPU_RESOURCE: Final = "nvidia.com/gpu"
TPU_RESOURCE: Final = "google.com/tpu"
ACCELERATOR_RESOURCES: Final = frozenset({GPU_RESOURCE, TPU_RESOURCE})
MIG_RESOURCE_PREFIX: Final = "nvidia.com/mig-"

# Taints.
GPU_TAINT: Final = {"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}
TPU_TAINT: Final = {"key": TPU_RESOURCE, "value": "present", "effect": "NoSchedule"}
SPOT_TAINT: Final = {"key": CAPACITY_TYPE, "value": "spot", "effect": "NoSchedule"}

# Node label values that pin a pod to spot capacity, one per provider convention.
SPOT_NODE_LABELS: Final = {
    CAPACITY_TYPE: "spot",
    KARPENTER_CAPACITY_TYPE: "spot",
    EKS_CAPACITY_TYPE: "SPOT",
    GKE_SPOT: "true",
}

# Role name -> key, exactly as `keys` in policies/fleetplane/lib/keys.rego.
KEYS: Final = {
    "workload_type": WORKLOAD_TYPE,
    "exempt": EXEMPT,
    "preemptible": PREEMPTIBLE,
    "checkpoint_location": CHECKPOINT_LOCATION,
    "last_checkpoint": LAST_CHECKPOINT,
    "idle_timeout_seconds": IDLE_TIMEOUT_SECONDS,
    "approval_id": APPROVAL_ID,
    "idle_warned_at": IDLE_WARNED_AT,
    "reclaim_deadline": RECLAIM_DEADLINE,
    "checkpoint_interval_seconds": CHECKPOINT_INTERVAL_SECONDS,
    "straggler_action": STRAGGLER_ACTION,
    "runtime_warned_at": RUNTIME_WARNED_AT,
    "stop_deadline": STOP_DEADLINE,
    "orphan_found_at": ORPHAN_FOUND_AT,
    "straggler_reported_at": STRAGGLER_REPORTED_AT,
    "pool": POOL,
    "capacity_type": CAPACITY_TYPE,
    "gpu_product": GPU_PRODUCT,
    "tpu_accelerator": TPU_ACCELERATOR,
    "tpu_topology": TPU_TOPOLOGY,
}
