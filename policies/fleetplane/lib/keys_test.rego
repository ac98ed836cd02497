package fleetplane.lib_test

import data.fleetplane.lib

accelerator_cases := {
	"nvidia.com/gpu": "nvidia.com/gpu",
	"nvidia.com/mig-1g.10gb": "nvidia.com/gpu",
	"nvidia.com/mig-7g.80gb": "nvidia.com/gpu",
	"google.com/tpu": "google.com/tpu",
}

test_accelerator_family[resource] if {
	some resource, family in accelerator_cases
	lib.is_accelerator(resource)
	lib.family(resource) == family
}

test_other_resources_are_not_accelerators[resource] if {
	some resource in ["cpu", "memory", "nvidia.com/gpu.shared", "amd.com/gpu", "ephemeral-storage"]
	not lib.is_accelerator(resource)
}

test_contract_keys if {
	lib.keys.workload_type == "fleetplane.dev/workload-type"
	lib.keys.approval_id == "fleetplane.dev/approval-id"
	lib.keys.gpu_product == "nvidia.com/gpu.product"
	lib.keys.tpu_accelerator == "cloud.google.com/gke-tpu-accelerator"
	lib.spot_taint == {"key": "fleetplane.dev/capacity-type", "value": "spot", "effect": "NoSchedule"}
	count(lib.spot_node_labels) == 4
}

test_platform_owned_keys if {
	lib.keys.exempt in lib.platform_owned.labels
	lib.keys.preemptible in lib.platform_owned.labels
	lib.keys.idle_warned_at in lib.platform_owned.annotations
	lib.keys.reclaim_deadline in lib.platform_owned.annotations
	lib.keys.runtime_warned_at in lib.platform_owned.annotations
	lib.keys.stop_deadline in lib.platform_owned.annotations
	lib.keys.orphan_found_at in lib.platform_owned.annotations
	lib.keys.straggler_reported_at in lib.platform_owned.annotations
	not lib.keys.checkpoint_interval_seconds in lib.platform_owned.annotations
	not lib.keys.straggler_action in lib.platform_owned.labels
	"scheduling.k8s.io/group-name" in lib.platform_owned.annotations
	not lib.keys.approval_id in lib.platform_owned.annotations
	not lib.keys.workload_type in lib.platform_owned.labels
}

test_device_variables if {
	"NVIDIA_VISIBLE_DEVICES" in lib.device_env_vars
	not "CUDA_VISIBLE_DEVICES" in lib.device_env_vars
	not "NVIDIA_DRIVER_CAPABILITIES" in lib.device_env_vars
	"void" in lib.device_env_inert_values
	count(lib.accelerator_taints) == 2
}

test_platform_owned_keys_are_the_keys if {
	lib.platform_owned.labels == {lib.keys.exempt, lib.keys.preemptible}
	lib.keys.idle_warned_at in lib.platform_owned.annotations
	lib.volcano_keys.group_name in lib.platform_owned.annotations
}
