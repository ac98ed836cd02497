# What an operator copies into the PodGroups it creates, judged on the
# user's object: KubeRay's Volcano integration makes one PodGroup per
# RayCluster (a RayJob's cluster included) with the queue its label
# volcano.sh/queue-name names and the priority class its label
# ray.io/priority-class-name names. The PodGroup is judged when KubeRay
# creates it (queue.rego), but refused there it leaves a cluster that never
# starts and a user who never sees why; so the labels are judged where the
# user writes them, with the same rules and a message that says what to set.
package fleetplane.admission

import data.fleetplane.lib.workloads

ray_queue_label := "volcano.sh/queue-name"

ray_priority_label := "ray.io/priority-class-name"

# METADATA
# description: >-
#   A label of the object under review that the request writes: on CREATE,
#   present; on UPDATE, changed.
label_written(key) := value if {
	input.request.operation == "CREATE"
	value := input.request.object.metadata.labels[key]
} else := value if {
	input.request.operation == "UPDATE"
	value := input.request.object.metadata.labels[key]
	value != object.get(workloads.as_object(input.request.oldObject), ["metadata", "labels", key], null)
}

deny contains msg if {
	kind_class in {"raycluster", "rayjob"}
	mode in {"full", "holding", "metadata"}
	in_team_namespace
	got := label_written(ray_queue_label)
	not team_queue == got
	msg := sprintf(
		"queue: label %s is %s, and KubeRay puts the cluster's PodGroup in the queue it names; set it to %q, the queue of team %s, or leave it out",
		[ray_queue_label, queue_shown(got), object.get(team_config, "queue", ""), team],
	)
}

deny contains msg if {
	kind_class in {"raycluster", "rayjob"}
	mode in {"full", "holding", "metadata"}
	namespace_class == "other"
	got := label_written(ray_queue_label)
	got in team_queues
	msg := sprintf("queue: label %s %q is the queue of a team, and namespace %q belongs to none; leave it out", [ray_queue_label, got, namespace])
}

deny contains msg if {
	kind_class in {"raycluster", "rayjob"}
	mode in {"full", "holding", "metadata"}
	judged_namespace
	got := label_written(ray_priority_label)
	not got in workload_priority_classes
	msg := sprintf(
		"priority-class: label %s is %s, and KubeRay gives the cluster's PodGroup that priority class; use one of: %s",
		[ray_priority_label, json.marshal(got), concat(", ", sort(workload_priority_classes))],
	)
}
