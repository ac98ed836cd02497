# Disruption budgets that tie the platform's hands (issue 33): the controller
# ends accelerator pods through the Eviction API (preemption, idle reclaim,
# the maximum-runtime stop, the drains of driver upgrades and GPU
# remediation), which honours PodDisruptionBudgets. A budget that never
# allows an eviction (maxUnavailable 0 or 0%, minAvailable 100%) over pods
# that may hold accelerators makes every one of those actions impossible:
# the pods keep their devices past every end the platform sets, and a drain
# never empties its node. So a team's budget over pods that may hold
# accelerators must leave at least one eviction; budgets that exclude them
# (CPU services: their pods never run on accelerator nodes, whose drains are
# the only ones the platform makes) keep any setting.
#
# Chosen at the gate, not in the controller: an eviction the budget refuses
# cannot be forced without breaking the promise budgets make to every other
# component, so the object is refused where its author can change it.
# minAvailable as a count blocks every eviction when it reaches the number of
# pods the selector matches. The review carries only the budget, so that
# number is the replicas of the workloads the controller recorded in the
# namespace (data.fleetplane.workloads: replicas and pod template labels)
# whose pods the selector matches: a count that reaches them is refused as
# 100% is. What the records cannot show stays admitted: a budget written
# before its workload, or a workload scaled down to it later (the controller
# reports the evictions such budgets refuse).
package fleetplane.admission

import data.fleetplane.config
import data.fleetplane.lib
import data.fleetplane.lib.workloads

pdb_spec := workloads.as_object(object.get(input.request.object, "spec", {}))

# METADATA
# description: >-
#   True when a label selector may match pods that hold accelerators. Every
#   accelerator pod carries a workload type label (accelerators.rego), so a
#   selector excludes them only when it requires that label to be absent or
#   to name no workload type. A missing selector matches no pod (policy/v1);
#   an empty one matches every pod of the namespace.
may_select_accelerator_pods(selector) if {
	is_object(selector)
	not excludes_workload_types(selector)
}

excludes_workload_types(selector) if {
	value := selector.matchLabels[lib.keys.workload_type]
	not config.workload_types[value]
}

excludes_workload_types(selector) if {
	some e in workloads.as_array(object.get(selector, "matchExpressions", []))
	e.key == lib.keys.workload_type
	e.operator == "DoesNotExist"
}

excludes_workload_types(selector) if {
	some e in workloads.as_array(object.get(selector, "matchExpressions", []))
	e.key == lib.keys.workload_type
	e.operator == "In"
	count([v | some v in workloads.as_array(e.values); config.workload_types[v]]) == 0
}

# METADATA
# description: >-
#   How a disruption budget's spec leaves no voluntary eviction whatever the
#   number of pods it covers, as the message names it: maxUnavailable of 0
#   (a count or a percentage), or minAvailable of 100%. Undefined otherwise.
blocks_every_eviction(spec) := sprintf("maxUnavailable %v", [spec.maxUnavailable]) if {
	intstr_zero(spec.maxUnavailable)
} else := sprintf("minAvailable %v", [spec.minAvailable]) if {
	is_string(spec.minAvailable)
	to_number(trim_suffix(trim_space(spec.minAvailable), "%")) >= 100
}

intstr_zero(value) if value == 0

eviction_blocker(spec) := blocks_every_eviction(spec)

eviction_blocker(spec) := blocks_every_eviction_now(spec) if not blocks_every_eviction(spec)

# METADATA
# description: >-
#   minAvailable as a count that reaches the pods its selector matches now,
#   as the message names it: the replicas of the workloads recorded in the
#   namespace whose pod template labels the selector matches (at least one
#   of them holding accelerators). A Deployment's ReplicaSets (their
#   templates carry pod-template-hash) are its own pods again and are left
#   out; a record without replicas or labels (an older controller) makes it
#   undefined, as does a budget that matches no recorded pod.
blocks_every_eviction_now(spec) := sprintf(
	"minAvailable %d while its selector matches %d pods (%s)",
	[spec.minAvailable, covered, concat(", ", sort([sprintf("%s: %d", [key, r.replicas]) | some key, r in selected]))],
) if {
	is_number(spec.minAvailable)
	records := workloads.as_object(object.get(data.fleetplane.workloads, namespace, {}))
	selected := {key: r |
		some key, r in records
		is_number(r.replicas)
		is_object(r.pod_labels)
		not r.pod_labels["pod-template-hash"]
		selector_matches(spec.selector, r.pod_labels)
	}
	some r in selected
	r.devices_per_replica > 0
	covered := sum([r.replicas | some r in selected])
	covered > 0
	spec.minAvailable >= covered
}

# METADATA
# description: >-
#   True when a label selector (metav1.LabelSelector) matches a set of
#   labels: every matchLabels pair and every matchExpression (In, NotIn,
#   Exists, DoesNotExist). An empty selector matches every set.
selector_matches(selector, labels) if {
	is_object(selector)
	every key, value in object.get(selector, "matchLabels", {}) {
		labels[key] == value
	}
	every e in workloads.as_array(object.get(selector, "matchExpressions", [])) {
		expression_matches(e, labels)
	}
}

expression_matches(e, labels) if {
	e.operator == "In"
	labels[e.key] in workloads.as_array(e.values)
}

expression_matches(e, labels) if {
	e.operator == "NotIn"
	not labels[e.key] in workloads.as_array(e.values)
}

expression_matches(e, labels) if {
	e.operator == "Exists"
	labels[e.key]
}

expression_matches(e, labels) if {
	e.operator == "DoesNotExist"
	not labels[e.key]
}

intstr_zero(value) if {
	is_string(value)
	to_number(trim_suffix(trim_space(value), "%")) == 0
}

deny contains msg if {
	mode == "disruption"
	judged_namespace
	may_select_accelerator_pods(pdb_spec.selector)
	setting := eviction_blocker(pdb_spec)
	msg := sprintf(
		"eviction-budget: PodDisruptionBudget %s sets %s, so no pod it covers can ever be evicted, and its selector may match pods that hold accelerators; the platform ends them (preemption, idle reclaim, driver upgrade and repair drains) through the Eviction API, so set maxUnavailable to 1 or more (or a percentage above 0%%), or exclude accelerator pods from its selector (%s DoesNotExist)",
		[object.get(input.request.object, ["metadata", "name"], "?"), setting, lib.keys.workload_type],
	)
}
