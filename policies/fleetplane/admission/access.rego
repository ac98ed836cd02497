# Accelerator access rules: Every way a pod can reach an accelerator counts as
# asking for one, and the gate counts resources.limits and DRA claims.
# So a pod is refused when it could reach devices the limits do not name: the
# NVIDIA runtime's device and feature variables in its environment (or a
# ConfigMap or Secret that may set them, on a pod that lands on accelerator
# nodes), a
# toleration of the accelerator taints or a selection of accelerator nodes
# without requesting an accelerator (on such a node the runtime exposes the
# node's GPUs to an image that asks for them, e.g. CUDA images setting
# NVIDIA_VISIBLE_DEVICES=all). Dynamic resource allocation (resourceClaims) is
# judged as a device request by the claim rules (dra_claims.rego). spec.nodeName, which skips the
# scheduler, its taints and every placement rule, is refused for every pod by
# the node-name rule (accelerators.rego). Host paths to device nodes are
# refused by the host-path rule with every other hostPath.
#
# What the spec cannot show, the image's own environment (CUDA images set
# NVIDIA_VISIBLE_DEVICES=all), is closed in the GPU Operator's toolkit
# configuration (components/gpu_operator.py): the runtime ignores device
# variables in unprivileged containers and takes a container's devices only
# from the device plugin's volume mounts (/dev/null mounted under
# /var/run/nvidia-container-devices, which only a hostPath, refused, could
# forge). A container the device plugin granted nothing, an init, sidecar or
# ephemeral one among them, then gets no device and no feature device.
package fleetplane.admission

import data.fleetplane.config
import data.fleetplane.lib
import data.fleetplane.lib.scheduling
import data.fleetplane.lib.workloads

deny contains msg if {
	some [where, entry, _] in checked_containers
	some variable in entry.container.env
	variable.name in lib.device_env_vars
	not inert_device_variable(variable)
	msg := sprintf(
		"accelerator-access: %s sets %s, which the NVIDIA container runtime reads to expose devices the gate cannot count; remove it and request the devices in resources.limits (nvidia.com/gpu)",
		[workloads.container_where(where, entry), variable.name],
	)
}

# A literal value that exposes no device; valueFrom could hold anything.
inert_device_variable(variable) if {
	not variable.valueFrom
	object.get(variable, "value", "") in lib.device_env_inert_values
}

# METADATA
# description: >-
#   Device classes the device plugin does not grant: the toolkit's feature
#   variables mount the node's RDMA, NVSwitch, GPUDirect Storage and gdrcopy
#   device nodes into any container that has GPUs, and the graphics and
#   display driver capabilities its GPUs' DRM nodes; in a container without
#   GPUs they do nothing, so every container is held to it (init, sidecar
#   and ephemeral containers included). A literal value only: valueFrom
#   could hold anything.
deny contains msg if {
	some [where, entry, _] in checked_containers
	some variable in entry.container.env
	variable.name in lib.device_feature_env_vars
	not inert_feature_variable(variable)
	msg := sprintf(
		"accelerator-access: %s sets %s, which makes the NVIDIA container runtime mount device nodes the device plugin does not grant; remove it (or set it to \"disabled\")",
		[workloads.container_where(where, entry), variable.name],
	)
}

inert_feature_variable(variable) if {
	not variable.valueFrom
	object.get(variable, "value", "") in lib.device_feature_inert_values
}

deny contains msg if {
	some [where, entry, _] in checked_containers
	some f in facts
	f.where == where
	f.devices > 0
	some source in entry.container.envFrom
	prefix := object.get(source, "prefix", "")
	variables := sort([v | some v in lib.device_reaching_env_vars; startswith(v, prefix)])
	count(variables) > 0
	msg := sprintf(
		"accelerator-access: %s takes its environment from %s without a prefix that rules out %s, which the NVIDIA container runtime reads to expose devices; set envFrom[].prefix (e.g. APP_) or list the variables under env",
		[workloads.container_where(where, entry), env_source(source), concat(", ", variables)],
	)
}

env_source(source) := sprintf("configMap %q", [source.configMapRef.name]) if {
	source.configMapRef
} else := sprintf("secret %q", [source.secretRef.name]) if {
	source.secretRef
} else := "a source"

# Tolerations count on CREATE and UPDATE of workloads, and when an update of
# a Pod adds one.
tolerations_judged(_) if pod_rules_apply

tolerations_judged(f) if {
	mode == "changes"
	judged_namespace
	f.spec.tolerations != object.get(workloads.as_object(input.request.oldObject), ["spec", "tolerations"], null)
}

deny contains msg if {
	some f in facts
	f.devices == 0
	tolerations_judged(f)
	some toleration in f.spec.tolerations
	some taint in lib.accelerator_taints
	scheduling.tolerates(toleration, taint)
	msg := sprintf(
		"accelerator-access: %s tolerates the taint %s of accelerator nodes but requests no accelerator; on such a node the NVIDIA runtime can expose the node's devices to it, so request them in resources.limits or remove the toleration",
		[f.where, taint.key],
	)
}

# Selecting accelerator nodes reaches them only with a toleration (denied
# above without devices); this names the mistake for pods that ask for no
# accelerator at all (one that mentions one is judged by the accelerator
# rules).
deny contains msg if {
	pod_rules_apply
	some f in facts
	count(f.demand) == 0
	some key in selected_node_labels(f.spec)
	accelerator_node_label(key)
	msg := sprintf(
		"accelerator-access: %s selects accelerator nodes (%s) but requests no accelerator; request the devices in resources.limits or remove the selection",
		[f.where, key],
	)
}

# The node label keys a pod spec constrains, by nodeSelector or required node
# affinity (any operator but NotIn and DoesNotExist).
selected_node_labels(spec) := {key | some key, _ in spec.nodeSelector} | {e.key |
	some term in scheduling.required_terms(spec)
	some e in term.matchExpressions
	not e.operator in {"NotIn", "DoesNotExist"}
}

accelerator_node_label(key) if key in lib.accelerator_node_labels

accelerator_node_label(key) if {
	some m in config.models
	m.node_label == key
}
