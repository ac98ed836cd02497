# METADATA
# title: Well-known keys
# description: >-
#   Label, annotation, taint and resource names shared by every policy. Mirrors
#   fleet/labels.py; a unit test checks that both agree.
package fleetplane.lib

# METADATA
# description: Label and annotation keys, by role.
keys := {
	"workload_type": "fleetplane.dev/workload-type",
	"exempt": "fleetplane.dev/exempt",
	"preemptible": "fleetplane.dev/preemptible",
	"checkpoint_location": "fleetplane.dev/checkpoint-location",
	"last_checkpoint": "fleetplane.dev/last-checkpoint",
	"idle_timeout_seconds": "fleetplane.dev/idle-timeout-seconds",
	"approval_id": "fleetplane.dev/approval-id",
	"idle_warned_at": "fleetplane.dev/idle-warned-at",
	"reclaim_deadline": "fleetplane.dev/reclaim-deadline",
	"checkpoint_interval_seconds": "fleetplane.dev/checkpoint-interval-seconds",
	"straggler_action": "fleetplane.dev/straggler-action",
	"runtime_warned_at": "fleetplane.dev/runtime-warned-at",
	"stop_deadline": "fleetplane.dev/stop-deadline",
	"orphan_found_at": "fleetplane.dev/orphan-found-at",
	"straggler_reported_at": "fleetplane.dev/straggler-reported-at",
	"pool": "fleetplane.dev/pool",
	"capacity_type": "fleetplane.dev/capacity-type",
	"gpu_product": "nvidia.com/gpu.product",
	"tpu_accelerator": "cloud.google.com/gke-tpu-accelerator",
	"tpu_topology": "cloud.google.com/gke-tpu-topology",
}

# METADATA
# description: >-
#   Node label values that pin a pod to spot capacity, one per provider
#   convention. A pod selecting any of them runs on spot.
spot_node_labels := {
	"fleetplane.dev/capacity-type": "spot",
	"karpenter.sh/capacity-type": "spot",
	"eks.amazonaws.com/capacityType": "SPOT",
	"cloud.google.com/gke-spot": "true",
}

# METADATA
# description: The taint fleetplane puts on spot nodes; tolerating it opens spot capacity.
spot_taint := {"key": "fleetplane.dev/capacity-type", "value": "spot", "effect": "NoSchedule"}

# METADATA
# description: >-
#   Whole-device accelerator resources. MIG devices are matched by prefix and
#   belong to the nvidia.com/gpu family.
accelerator_resources := {"nvidia.com/gpu", "google.com/tpu"}

mig_resource_prefix := "nvidia.com/mig-"

# METADATA
# description: >-
#   Labels and annotations only the platform writes: the controller acts on
#   them (exempt, preemptible, its idle warning and reclaim deadline), records
#   what it did with them (controller/keys.py), or Volcano's controllers bind a
#   pod to a PodGroup with them. A user who could write them would choose
#   what the controller spares or when it reclaims, or the PodGroup (queue and
#   priority) a pod joins; the gate refuses them from anyone but the platform
#   (data.fleetplane.config.platform). Written out rather than taken from keys:
#   a constant costs OPA nothing per review, a rule built from other rules is
#   built on every one (keys_test checks both agree).
platform_owned := {
	"labels": {"fleetplane.dev/exempt", "fleetplane.dev/preemptible"},
	"annotations": {
		"fleetplane.dev/idle-warned-at",
		"fleetplane.dev/reclaim-deadline",
		"fleetplane.dev/runtime-warned-at",
		"fleetplane.dev/stop-deadline",
		"fleetplane.dev/orphan-found-at",
		"fleetplane.dev/straggler-reported-at",
		"fleetplane.dev/reclaimed-at",
		"fleetplane.dev/reclaimed-replicas",
		"fleetplane.dev/reclaim-reason",
		"fleetplane.dev/preempted-by",
		"fleetplane.dev/preempted-at",
		"fleetplane.dev/preemption-reason",
		"fleetplane.dev/preemption-victims",
		"scheduling.k8s.io/group-name",
	},
}

# METADATA
# description: >-
#   Volcano's pod and namespace annotations: the queue a plain pod's PodGroup
#   is placed in, and the PodGroup a pod belongs to.
volcano_keys := {
	"queue_name": "scheduling.volcano.sh/queue-name",
	"group_name": "scheduling.k8s.io/group-name",
}

# METADATA
# description: >-
#   The taints on accelerator nodes (components/labels.py GPU_TAINT and
#   TPU_TAINT): a pod tolerating one may land on an accelerator node.
accelerator_taints := [
	{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
	{"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"},
]

# METADATA
# description: >-
#   Node labels only accelerator nodes carry, besides the models' own node
#   labels (config.models.*.node_label): selecting one picks accelerator nodes.
accelerator_node_labels := {
	"nvidia.com/gpu.product",
	"nvidia.com/gpu.present",
	"nvidia.com/gpu.count",
	"nvidia.com/gpu.family",
	"cloud.google.com/gke-accelerator",
	"cloud.google.com/gke-tpu-accelerator",
	"cloud.google.com/gke-tpu-topology",
}

# METADATA
# description: >-
#   Environment variables the NVIDIA container runtime (nvidia-container-toolkit)
#   reads to expose devices to a container, whatever its resources say:
#   NVIDIA_VISIBLE_DEVICES (GPUs), NVIDIA_MIG_CONFIG_DEVICES and
#   NVIDIA_MIG_MONITOR_DEVICES (MIG management), NVIDIA_IMEX_CHANNELS (IMEX
#   channels). Not in the list, because they expose nothing by themselves:
#   NVIDIA_DRIVER_CAPABILITIES (which driver libraries accompany devices
#   already exposed; graphics and display add the DRM nodes of those same
#   GPUs, the toolkit's NewDRMNodesDiscoverer), CUDA_VISIBLE_DEVICES and TPU_VISIBLE_CHIPS (read by CUDA
#   and libtpu inside the process, to choose among devices already mounted).
device_env_vars := {
	"NVIDIA_VISIBLE_DEVICES",
	"NVIDIA_MIG_CONFIG_DEVICES",
	"NVIDIA_MIG_MONITOR_DEVICES",
	"NVIDIA_IMEX_CHANNELS",
}

# METADATA
# description: >-
#   Values of a device variable that expose no device: "void" and empty (the
#   runtime treats the container as a non-GPU one) and "none" (driver
#   libraries only).
device_env_inert_values := {"", "void", "none"}

# METADATA
# description: >-
#   Feature variables of the NVIDIA container runtime that mount further
#   device nodes into a container that already has GPUs (the toolkit's
#   gated devices, internal/modifier/gated.go and cdi.go, when set to
#   "enabled"): NVIDIA_GDS (/dev/nvidia-fs*, GPUDirect Storage),
#   NVIDIA_MOFED (/dev/infiniband/*, the node's RDMA network), NVIDIA_GDRCOPY
#   (/dev/gdrdrv) and NVIDIA_NVSWITCH (/dev/nvidia-nvswitch*, the node's
#   NVSwitch fabric). None of them is a resource the device plugin grants.
device_feature_env_vars := {
	"NVIDIA_GDS",
	"NVIDIA_MOFED",
	"NVIDIA_GDRCOPY",
	"NVIDIA_NVSWITCH",
}

# METADATA
# description: >-
#   Values of a feature variable that mount nothing: the toolkit acts on
#   "enabled" only; these are the spellings of "off" kept admissible.
device_feature_inert_values := {"", "disabled", "false"}

# METADATA
# description: >-
#   Every variable of the container's environment the NVIDIA container
#   runtime reads to decide which device nodes it mounts: a ConfigMap or
#   Secret taken whole (envFrom without a prefix that rules them out) may set
#   any of them.
device_reaching_env_vars := device_env_vars | device_feature_env_vars

# METADATA
# description: True for every extended resource name that is an accelerator.
is_accelerator(resource) if resource in accelerator_resources

is_accelerator(resource) if startswith(resource, mig_resource_prefix)

# METADATA
# description: The device family a resource is priced and selected by.
family(resource) := "nvidia.com/gpu" if startswith(resource, mig_resource_prefix)

family(resource) := resource if resource in accelerator_resources
