# Dynamic Resource Allocation names: The names under which Dynamic Resource
# Allocation (resource.k8s.io/v1) reaches accelerators. NVIDIA's DRA driver
# publishes its GPUs under the DeviceClass gpu.nvidia.com; Kubernetes lets a
# container ask for devices of a class through the class's implicit extended
# resource deviceclass.resource.kubernetes.io/<class> in its limits, which the
# scheduler turns into a claim. The gate counts that resource as a GPU of the
# nvidia.com/gpu family (model, pools, approval, maximum, budget and
# preemption all read lib.family), and refuses the implicit resource of every
# other class: the gate cannot know what devices it allocates.
package fleetplane.lib

# METADATA
# description: The prefix of every DeviceClass's implicit extended resource.
dra_extended_resource_prefix := "deviceclass.resource.kubernetes.io/"

# METADATA
# description: >-
#   The DeviceClasses of accelerator DRA drivers the gate counts, each with the
#   device family it is priced and selected by.
dra_device_classes := {"gpu.nvidia.com": "nvidia.com/gpu"}

# METADATA
# description: The implicit extended resources the gate counts as whole accelerators.
dra_accelerator_resources := {concat("", [dra_extended_resource_prefix, class]) | some class, _ in dra_device_classes}

is_accelerator(resource) if resource in dra_accelerator_resources

family(resource) := dra_device_classes[class] if {
	startswith(resource, dra_extended_resource_prefix)
	class := substring(resource, count(dra_extended_resource_prefix), -1)
}
