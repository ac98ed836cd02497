# Queue rule: A Volcano Job in a team namespace runs in its team's Volcano
# queue, where the team's quota, guarantee and weight apply. Volcano's own
# mutating webhook gives a job that names no queue the queue "default" before
# this gate sees it (the namespace's queue annotation only reaches PodGroups
# that Volcano creates for plain pods), so such a job is refused here with the
# queue to set. Judged on CREATE only: spec.queue cannot change afterwards,
# and jobs admitted before this rule must stay updatable.
package fleetplane.admission

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
