# Relabelling running pods (issue 33): a pod's workload type label and its
# Volcano queue decide which type's limits, runtime bound, idle rules and
# budget exemption apply and which queue's capability it counts against.
# They are judged when the pod is created; a pod's labels and annotations
# stay writable afterwards, so a pod admitted as one type (or in one queue)
# could be relabelled to dodge the rules of another: an exempt type's budget
# or idle rules, a preemptible type's eviction. So a pod keeps the workload
# type and queue it was admitted with; only the platform changes them. (The
# team is the namespace's, which a pod cannot change.)
package fleetplane.admission

import data.fleetplane.lib
import data.fleetplane.lib.workloads

# METADATA
# description: >-
#   The keys a pod keeps from its admission, as [labels or annotations,
#   key]: the workload type label and the queue label of Volcano's
#   integrations. Volcano's queue annotation is judged on every update by
#   queue.rego (only the team's one queue), which leaves nothing to dodge.
admission_fixed_keys := [
	["labels", lib.keys.workload_type],
	["labels", ray_queue_label],
]

deny contains msg if {
	mode == "changes"
	judged_namespace
	not platform_requester
	old := workloads.as_object(object.get(input.request, "oldObject", null))
	some [field, key] in admission_fixed_keys
	before := object.get(old, ["metadata", field, key], null)
	after := object.get(input.request.object, ["metadata", field, key], null)
	before != after
	msg := sprintf(
		"pod-relabel: pod %s changes %s %s from %s to %s; a pod keeps the workload type and queue it was admitted with (they decide its limits, budget and queue), so create a new pod with the new value instead",
		[
			object.get(input.request.object, ["metadata", "name"], "?"),
			trim_suffix(field, "s"), key, json.marshal(before), json.marshal(after),
		],
	)
}
