# Queue rules: A Volcano Job in a team namespace runs in its team's Volcano
# queue, where the team's quota, guarantee and weight apply; so do the
# PodGroups Volcano creates, and the plain pods that name a queue. Volcano's own
# mutating webhook gives a job that names no queue the queue "default" before
# this gate sees it (the namespace's queue annotation only reaches PodGroups
# that Volcano creates for plain pods), so such a job is refused here with the
# queue to set. Judged on CREATE only: spec.queue cannot change afterwards,
# and jobs admitted before this rule must stay updatable.
package fleetplane.admission

import data.fleetplane.config
import data.fleetplane.lib
import data.fleetplane.lib.workloads

deny contains msg if {
	kind_class == "volcano"
	input.request.operation == "CREATE"
	object.get(input.request, "subResource", "") == ""
	in_team_namespace
	got := object.get(input.request.object, ["spec", "queue"], "")
	not team_queue == got
	msg := queue_message(got)
}

# METADATA
# description: The team's Volcano queue; undefined when the data names none.
team_queue := q if {
	q := team_config.queue
	is_string(q)
	q != ""
}

queue_message(got) := sprintf(
	"queue: Volcano Job spec.queue is %s; set spec.queue: %q, the queue of team %s, so that the team's quota applies",
	[queue_shown(got), team_queue, team],
) if {
	team_queue
} else := sprintf(
	"queue: team %s has no Volcano queue in data.fleetplane.config.teams.%s.queue, so its Volcano Jobs cannot be placed; ask the platform team",
	[team, team],
)

queue_shown(got) := sprintf("%q", [got]) if {
	is_string(got)
	got != ""
} else := "not set" if {
	got == ""
} else := sprintf("%v (not a string)", [got])

# --------------------------------------------------------------- PodGroups

# A PodGroup decides the queue and the priority Volcano schedules its pods
# with. Volcano creates one for each Volcano Job and each plain pod it
# schedules, from the queue and priority the gate judged on them; a user's
# own PodGroup would pick both unseen (and any pod of the namespace could
# join it), so only the platform creates them.
deny contains msg if {
	mode == "podgroup"
	judged_namespace
	input.request.operation == "CREATE"
	not platform_requester
	msg := "podgroup: PodGroups are created by Volcano for the Volcano Jobs and pods the gate judged, which give them their queue and priority; submit a Volcano Job, or pods with schedulerName: volcano, instead"
}

# Whether an update writes a field of the object's spec: always on CREATE,
# on UPDATE when it changes.
spec_written(_) if input.request.operation == "CREATE"

spec_written(field) if {
	input.request.operation == "UPDATE"
	object.get(input.request.object, ["spec", field], null) != object.get(workloads.as_object(input.request.oldObject), ["spec", field], null)
}

deny contains msg if {
	mode == "podgroup"
	in_team_namespace
	spec_written("queue")
	got := object.get(input.request.object, ["spec", "queue"], "")
	not team_queue == got
	msg := replace(queue_message(got), "Volcano Job spec.queue", "PodGroup spec.queue")
}

deny contains msg if {
	mode == "podgroup"
	namespace_class == "other"
	spec_written("queue")
	got := input.request.object.spec.queue
	got in team_queues
	msg := sprintf("queue: PodGroup spec.queue %q is the queue of a team, and namespace %q belongs to none; use the default queue", [got, namespace])
}

team_queues := {q | some t in config.teams; q := t.queue}

deny contains msg if {
	mode == "podgroup"
	judged_namespace
	spec_written("priorityClassName")
	class := input.request.object.spec.priorityClassName
	class != ""
	not class in workload_priority_classes
	msg := sprintf(
		"priority-class: PodGroup spec.priorityClassName %s is no workload type's; use one of: %s",
		[json.marshal(class), concat(", ", sort(workload_priority_classes))],
	)
}

workload_priority_classes := {c | some t in config.workload_types; some c in t.priority_classes}

# ----------------------------------------------------- plain pods' queue

# Volcano puts the PodGroup of a plain pod in the queue its annotation names
# (else the namespace's, the team's).
deny contains msg if {
	mode in {"full", "changes"}
	judged_namespace
	some f in facts
	got := f.annotations[lib.volcano_keys.queue_name]
	pod_queue_written(f.where, got)
	not pod_queue_allowed(got)
	msg := pod_queue_message(f.where, got)
}

pod_queue_written(_, _) if mode == "full"

pod_queue_written(where, got) if {
	mode == "changes"
	some old in workloads.templates(workloads.as_object(input.request.oldObject), kind_class)
	old.where == where
	object.get(workloads.as_object(old.template), ["metadata", "annotations", lib.volcano_keys.queue_name], null) != got
}

pod_queue_written(_, _) if {
	mode == "changes"
	not is_object(object.get(input.request, "oldObject", null))
}

pod_queue_allowed(got) if team_queue == got

pod_queue_allowed(got) if {
	namespace_class == "other"
	not got in team_queues
}

pod_queue_message(where, got) := sprintf(
	"queue: %s annotation %s is %s; remove it or set it to %q, the queue of team %s",
	[where, lib.volcano_keys.queue_name, json.marshal(got), team_queue, team],
) if {
	team_queue
} else := sprintf(
	"queue: %s annotation %s is %s, the queue of a team, and namespace %q belongs to none; remove it",
	[where, lib.volcano_keys.queue_name, json.marshal(got), namespace],
) if {
	namespace_class == "other"
} else := queue_message(got)

# ------------------------------------------- every accelerator pod's queue

# Volcano 1.15's PodGroup controller builds (and rebuilds, on pod updates) the
# PodGroup of a pod it did not group itself and takes its queue only from the
# pod's scheduling.volcano.sh/queue-name annotation: without one the group
# lands in the queue "default", outside the team's quota and guarantee,
# whatever the namespace says. So every accelerator pod, and every pod
# template of an accelerator workload, in a team namespace names its queue.
# Pods Volcano groups itself carry the PodGroup's name instead
# (scheduling.k8s.io/group-name, which only the platform may write: trust):
# the pods of a Volcano Job, whose spec.queue is judged above, and Volcano
# Jobs' own task templates are left to that rule. Judged where templates are
# written (CREATE, or an UPDATE that changes them): a workload admitted
# before this rule can still be scaled or suspended.
deny contains msg if {
	mode == "full"
	in_team_namespace
	kind_class != "volcano"
	some f in facts
	count(f.demand) > 0
	not queue_named_or_grouped(f.annotations)
	msg := queue_annotation_missing_message(f.where)
}

queue_named_or_grouped(annotations) if annotations[lib.volcano_keys.queue_name]

queue_named_or_grouped(annotations) if annotations[lib.volcano_keys.group_name]

# METADATA
# description: >-
#   The refusal of an accelerator template without the queue annotation,
#   naming what to write (shared with the fast path).
queue_annotation_missing_message(where) := sprintf(
	"queue: %s has no annotation %s; add %s: %q, the queue of team %s, to its metadata.annotations (without it Volcano's PodGroup controller puts the pod in the default queue, outside the team's quota)",
	[where, lib.volcano_keys.queue_name, lib.volcano_keys.queue_name, team_queue, team],
) if {
	team_queue
} else := queue_message("")

# --------------------------------------------------- Volcano Job priority

# A Volcano Job's own priorityClassName is its PodGroup's, the priority
# Volcano orders and preempts jobs by: it is one of the type's, like the
# tasks'.
deny contains msg if {
	judged
	kind_class == "volcano"
	class := input.request.object.spec.priorityClassName
	not class in type_config.priority_classes
	msg := priority_class_message("Volcano Job spec", input.request.object.spec, workload_type, type_config.priority_classes)
}

deny contains msg if {
	kind_class == "volcano"
	input.request.operation == "CREATE"
	object.get(input.request, "subResource", "") == ""
	namespace_class == "other"
	got := input.request.object.spec.queue
	got in team_queues
	msg := sprintf("queue: Volcano Job spec.queue %q is the queue of a team, and namespace %q belongs to none; use the default queue", [got, namespace])
}
