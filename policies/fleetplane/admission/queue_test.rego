package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

worker := [["worker", 2, testing.training]]

queue_cases := {
	"the team's queue": {"fields": {"queue": "research"}, "want": set()},
	"the default queue (Volcano's webhook sets it when none is named)": {"fields": {"queue": "default"}, "want": {"queue"}},
	"another team's queue": {"fields": {"queue": "serving"}, "want": {"queue"}},
	"no queue at all": {"fields": {}, "want": {"queue"}},
	"a queue that is not a string": {"fields": {"queue": 7}, "want": {"queue"}},
}

test_volcano_queue[name] if {
	some name, tc in queue_cases
	rules(testing.volcano_in_queue(worker, tc.fields)) == tc.want
}

test_queue_message_names_the_queue_to_set if {
	some_message(
		testing.volcano_in_queue(worker, {"queue": "default"}),
		`queue: Volcano Job spec.queue is "default"; set spec.queue: "research", the queue of team research, so that the team's quota applies`,
	)
	some_message(testing.volcano_in_queue(worker, {}), `spec.queue is not set; set spec.queue: "research"`)
	some_message(testing.volcano_in_queue(worker, {"queue": 7}), `spec.queue is 7 (not a string)`)
}

test_cpu_volcano_jobs_too if {
	rules(testing.volcano_in_queue([["web", 1, testing.cpu]], {"queue": "default"})) == {"queue"}
}

test_only_in_team_namespaces if {
	rev := testing.in_namespace(testing.volcano_in_queue([["web", 1, testing.cpu]], {"queue": "default"}), "tools")
	not "queue" in rules(rev)
}

test_only_on_create if {
	rev := testing.volcano_in_queue(worker, {"queue": "default"})
	not "queue" in rules(testing.as_update(rev, rev.request.object))
}

test_a_team_without_a_queue_in_the_data_cannot_place_volcano_jobs if {
	config := json.remove(testing.config, ["teams/research/queue"])
	rev := testing.volcano_in_queue(worker, {"queue": "research"})
	msgs := admission.deny with input as rev with data.fleetplane.config as config
	some msg in msgs
	startswith(msg, "queue: team research has no Volcano queue in data.fleetplane.config.teams.research.queue")
}

test_volcano_jobs_take_the_full_rules if {
	not admission.fast_response with input as testing.volcano(worker)
		with data.fleetplane.config as testing.config
}
