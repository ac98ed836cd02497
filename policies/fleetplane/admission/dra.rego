# Dynamic Resource Allocation: Accelerators reached through Dynamic Resource
# Allocation. A container limit on the implicit extended resource of NVIDIA's
# GPU DeviceClass (deviceclass.resource.kubernetes.io/gpu.nvidia.com) is
# counted as that many nvidia.com/gpu devices by lib/workloads (containers),
# so the model, pool, approval, maximum, budget and preemption rules judge it
# as they judge nvidia.com/gpu. The implicit resource of any other DeviceClass
# is refused: the gate cannot know which devices such a class selects.
# ResourceClaims, templates and spec.resourceClaims are judged as device
# requests by the claim rules (dra_claims.rego).
package fleetplane.admission

import data.fleetplane.lib
import data.fleetplane.lib.workloads

deny contains msg if {
	pod_rules_apply
	some f in facts
	some entry in workloads.containers(f.spec)
	some field in ["limits", "requests"]
	some resource, _ in entry.container.resources[field]
	startswith(resource, lib.dra_extended_resource_prefix)
	not resource in lib.dra_accelerator_resources
	msg := sprintf(
		"accelerator-access: %s asks for %s, the extended resource of a DeviceClass the gate does not count; request GPUs as nvidia.com/gpu or %s",
		[workloads.container_where(f.where, entry), resource, concat(" or ", sort(lib.dra_accelerator_resources))],
	)
}
