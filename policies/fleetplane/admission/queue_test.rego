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
		with data.fleetplane.approvals as testing.approvals
}

# --------------------------------------------------------------- PodGroups

volcano_sa := "system:serviceaccount:volcano-system:volcano-controllers"

podgroup_cases := {
	"a user creates a PodGroup": [testing.podgroup({"queue": "research"}), {"podgroup"}],
	"volcano creates one in the team's queue": [testing.by(testing.podgroup({"queue": "research", "priorityClassName": "fleetplane-training"}), volcano_sa, []), set()],
	"volcano creates one in another team's queue": [testing.by(testing.podgroup({"queue": "serving"}), volcano_sa, []), {"queue"}],
	"with a priority class of no workload type": [testing.by(testing.podgroup({"queue": "research", "priorityClassName": "system-cluster-critical"}), volcano_sa, []), {"priority-class"}],
	"a user updates a PodGroup, queue and priority unchanged": [
		testing.as_update(testing.podgroup({"queue": "research", "minMember": 3}), testing.podgroup({"queue": "research"}).request.object),
		set(),
	],
	"a user moves a PodGroup to another queue": [
		testing.as_update(testing.podgroup({"queue": "serving"}), testing.podgroup({"queue": "research"}).request.object),
		{"queue"},
	],
	"a user raises a PodGroup's priority": [
		testing.as_update(testing.podgroup({"queue": "research", "priorityClassName": "system-node-critical"}), testing.podgroup({"queue": "research"}).request.object),
		{"priority-class"},
	],
	"a team's queue outside the teams": [testing.in_namespace(testing.by(testing.podgroup({"queue": "research"}), volcano_sa, []), "default"), {"queue"}],
	"the default queue outside the teams": [testing.in_namespace(testing.by(testing.podgroup({"queue": "default"}), volcano_sa, []), "default"), set()],
}

test_podgroups[name] if {
	some name, [rev, want] in podgroup_cases
	rules(rev) == want
}

test_podgroup_queue_message if {
	some_message(podgroup_cases["volcano creates one in another team's queue"][0], `queue: PodGroup spec.queue is "serving"; set spec.queue: "research"`)
}

# --------------------------------------------------------- plain pods' queue

queue_annotation(q) := {"scheduling.volcano.sh/queue-name": q}

pod_queue_cases := {
	"the team's queue": [testing.pod(testing.with_annotations(testing.cpu, queue_annotation("research"))), set()],
	"another team's queue": [testing.pod(testing.with_annotations(testing.cpu, queue_annotation("serving"))), {"queue"}],
	"in a deployment's template": [testing.deployment(testing.with_annotations(testing.training, queue_annotation("serving")), 1), {"queue"}],
	"a team's queue outside the teams": [testing.pod_in(testing.with_annotations(testing.cpu, queue_annotation("research")), "default"), {"queue"}],
	"another queue outside the teams": [testing.pod_in(testing.with_annotations(testing.cpu, queue_annotation("batch-low")), "default"), set()],
	"an update moving a pod to another team's queue": [
		testing.as_update(testing.pod(testing.with_annotations(testing.cpu, queue_annotation("serving"))), testing.pod(testing.cpu).request.object),
		{"queue"},
	],
	"an update keeping the queue": [
		testing.as_update(testing.pod(testing.with_annotations(testing.cpu, queue_annotation("serving"))), testing.pod(testing.with_annotations(testing.cpu, queue_annotation("serving"))).request.object),
		set(),
	],
	"an update without the old object": [testing.as_update(testing.pod(testing.with_annotations(testing.cpu, queue_annotation("serving"))), null), {"queue"}],
	"an update that sends no old object": [json.remove(testing.as_update(testing.pod(testing.with_annotations(testing.cpu, queue_annotation("serving"))), null), ["request/oldObject"]), {"queue"}],
}

test_pod_queue[name] if {
	some name, [rev, want] in pod_queue_cases
	rules(rev) == want
}

test_pod_queue_messages if {
	some_message(pod_queue_cases["another team's queue"][0], `queue: pod annotation scheduling.volcano.sh/queue-name is "serving"; remove it or set it to "research", the queue of team research`)
	some_message(pod_queue_cases["a team's queue outside the teams"][0], `the queue of a team, and namespace "default" belongs to none; remove it`)
}

test_pod_queue_without_a_team_queue if {
	config := json.remove(testing.config, ["teams/research/queue"])
	msgs := admission.deny with input as testing.pod(testing.with_annotations(testing.cpu, queue_annotation("serving")))
		with data.fleetplane.config as config
	some msg in msgs
	startswith(msg, "queue: team research has no Volcano queue")
}

# ---------------------------------------------------- Volcano Job priority

test_volcano_job_priority_class[name] if {
	some name, [class, want] in {
		"the type's": ["fleetplane-training", set()],
		"another type's": ["fleetplane-inference", {"priority-class"}],
	}
	rules(testing.volcano_in_queue(worker, {"queue": "research", "priorityClassName": class})) == want
}

test_volcano_job_priority_message if {
	some_message(testing.volcano_in_queue(worker, {"queue": "research", "priorityClassName": "x"}), `priority-class: Volcano Job spec has priorityClassName "x"; training workloads must use one of`)
}

test_volcano_job_outside_the_teams_may_not_use_a_team_queue if {
	rev := testing.in_namespace(testing.volcano_in_queue([["web", 1, testing.cpu]], {"queue": "research"}), "default")
	rules(rev) == {"queue"}
	rules(testing.in_namespace(testing.volcano_in_queue([["web", 1, testing.cpu]], {"queue": "default"}), "default")) == set()
}

# ------------------------------------------- every accelerator pod's queue

unqueued(tmpl) := json.remove(tmpl, ["metadata/annotations/scheduling.volcano.sh~1queue-name"])

volcano_made := "system:serviceaccount:volcano-system:volcano-controllers"

# A pod of a Volcano Job, as Volcano's job controller creates it: grouped,
# owned by the job, its queue on the PodGroup (spec.queue, judged on the job).
volcano_job_pod := testing.by(
	testing.pod(object.union(unqueued(testing.training), {"metadata": {
		"annotations": {"scheduling.k8s.io/group-name": "v-0123", "volcano.sh/queue-name": "research"},
		"ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "v", "uid": "u", "controller": true}],
	}})),
	volcano_made,
	["system:serviceaccounts"],
)

queue_annotation_cases := {
	"an accelerator pod naming its team's queue": [testing.pod(testing.training), set()],
	"an accelerator pod naming none": [testing.pod(unqueued(testing.training)), {"queue"}],
	"a deployment's accelerator template naming none": [testing.deployment(unqueued(testing.training), 1), {"queue"}],
	"a job's accelerator template naming none": [testing.job(unqueued(testing.batch), {}), {"queue"}],
	"a cronjob's accelerator template naming none": [testing.cronjob_forbid(unqueued(testing.batch), {}), {"queue"}],
	"a pod without accelerators naming none": [testing.pod(testing.cpu), set()],
	"a pod of a Volcano Job, grouped by Volcano": [volcano_job_pod, set()],
	"a Volcano Job's task templates (spec.queue decides)": [testing.volcano([["worker", 2, unqueued(testing.training)]]), set()],
	"scaling a deployment admitted before the rule": [
		testing.as_update(
			testing.deployment(unqueued(testing.training), 2),
			testing.deployment(unqueued(testing.training), 1).request.object,
		),
		set(),
	],
	"changing the template of such a deployment": [
		testing.as_update(
			testing.deployment(testing.with_labels(unqueued(testing.training), {"app": "x"}), 1),
			testing.deployment(unqueued(testing.training), 1).request.object,
		),
		{"queue"},
	],
	"updating a pod admitted before the rule": [
		testing.as_update(testing.pod(unqueued(testing.training)), testing.pod(unqueued(testing.training)).request.object),
		set(),
	],
}

test_accelerator_templates_name_their_queue[name] if {
	some name, [rev, want] in queue_annotation_cases
	rules(rev) == want
}

test_a_missing_queue_annotation_says_what_to_write if {
	some_message(
		testing.pod(unqueued(testing.training)),
		`queue: pod has no annotation scheduling.volcano.sh/queue-name; add scheduling.volcano.sh/queue-name: "research", the queue of team research, to its metadata.annotations`,
	)
	some_message(
		testing.pod_in(unqueued(testing.inference), "ml-serving"),
		`add scheduling.volcano.sh/queue-name: "serving", the queue of team serving`,
	)
	some_message(testing.deployment(unqueued(testing.training), 1), "queue: spec.template has no annotation")
}

test_a_missing_queue_annotation_in_a_team_without_a_queue if {
	config := json.remove(testing.config, ["teams/research/queue"])
	msgs := admission.deny with input as testing.pod(unqueued(testing.training))
		with data.fleetplane.config as config
	some msg in msgs
	startswith(msg, "queue: team research has no Volcano queue")
}

test_the_fast_path_refuses_a_missing_queue_like_the_full_rules if {
	rev := testing.pod(unqueued(testing.training))
	fast := admission.fast_response with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
	fast.allowed == false
	contains(fast.status.message, "has no annotation scheduling.volcano.sh/queue-name")
	fast == data.system.full_response with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

test_the_fast_path_still_takes_a_pod_naming_its_queue if {
	admission.fast_allowed with input as testing.pod(testing.training)
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}
