# Maintenance taints: the platform takes a node out of service with taints: the cordon
# (node.kubernetes.io/unschedulable, set by kubectl cordon and by the
# driver upgrade's and GPU remediation's drains) and GPU remediation's
# quarantine (fleetplane.dev/gpu-unhealthy, controller/remediation/states.py
# TAINT_KEY). A team pod that tolerates them is placed on a node being
# drained or repaired: it runs on a faulty GPU, holds the drain up or is
# evicted again with its work lost, and the drain never empties the node.
# So a team's pods may not tolerate them (nor tolerate every taint, which
# includes them). Tolerations of node outages (not-ready, unreachable, with
# tolerationSeconds) and of any other taint stay allowed.
package fleetplane.admission

import data.fleetplane.lib.workloads

# METADATA
# description: >-
#   The taints the platform's maintenance puts on a node (any value: the
#   quarantine's value is the fault's kind).
maintenance_taint_keys := {"node.kubernetes.io/unschedulable", "fleetplane.dev/gpu-unhealthy"}

# METADATA
# description: >-
#   The maintenance taint key a toleration tolerates, whatever the taint's
#   value and effect (both are NoSchedule): its key with any operator (the
#   values differ per node), or an empty key with Exists, which tolerates
#   every taint. Undefined for any other toleration.
tolerated_maintenance_taint(toleration) := key if {
	key := object.get(toleration, "key", "")
	key in maintenance_taint_keys
	object.get(toleration, "effect", "") in {"", "NoSchedule"}
} else := "every taint" if {
	object.get(toleration, "key", "") == ""
	object.get(toleration, "operator", "Equal") == "Exists"
	object.get(toleration, "effect", "") in {"", "NoSchedule"}
}

deny contains msg if {
	some f in facts
	tolerations_judged(f)
	some toleration in workloads.as_array(f.spec.tolerations)
	tolerated := tolerated_maintenance_taint(toleration)
	msg := sprintf(
		"maintenance-toleration: %s tolerates %s; the platform's maintenance taints (%s) keep pods off nodes being drained, upgraded or repaired, so tolerate only the taints your pods need (node outages with tolerationSeconds stay allowed)",
		[f.where, tolerated, concat(", ", sort(maintenance_taint_keys))],
	)
}

# METADATA
# description: >-
#   True when a pod spec has a toleration of a maintenance taint (the fast
#   path leaves such specs to the full rules).
tolerates_maintenance(spec) if {
	some toleration in workloads.as_array(object.get(spec, "tolerations", []))
	tolerated_maintenance_taint(toleration)
}
