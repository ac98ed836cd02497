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
# description: True for every extended resource name that is an accelerator.
is_accelerator(resource) if resource in accelerator_resources

is_accelerator(resource) if startswith(resource, mig_resource_prefix)

# METADATA
# description: The device family a resource is priced and selected by.
family(resource) := "nvidia.com/gpu" if startswith(resource, mig_resource_prefix)

family(resource) := resource if resource in accelerator_resources
