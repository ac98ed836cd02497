package fleetplane.admission_test

import data.fleetplane.testing

# Issue 33: an UPDATE that relabels a running pod to dodge its type's or
# queue's rules.
admitted_pod := testing.pod(testing.training).request.object

relabelled(labels, annotations) := testing.as_update(
	testing.pod(testing.with_annotations(testing.with_labels(testing.training, labels), annotations)),
	admitted_pod,
)

relabel_cases := {
	"the same labels": [relabelled({}, {}), set()],
	"a label of the user's own": [relabelled({"team.example/run": "7"}, {}), set()],
	"another workload type": [relabelled({"fleetplane.dev/workload-type": "inference"}, {}), {"pod-relabel"}],
	"a queue label": [relabelled({"volcano.sh/queue-name": "research"}, {}), {"pod-relabel"}],
	# queue.rego judges the queue annotation on every update (queue_test.rego).
	"another queue annotation": [relabelled({}, {"scheduling.volcano.sh/queue-name": "serving"}), set()],
}

test_pod_relabel[name] if {
	some name, [rev, want] in relabel_cases
	{r | some r in rules(rev); r == "pod-relabel"} == want
}

test_pod_relabel_message_says_what_to_change if {
	some_message(relabel_cases["another workload type"][0], `pod-relabel: pod p changes label fleetplane.dev/workload-type from "training" to "inference"; a pod keeps the workload type and queue it was admitted with`)
}

test_pod_relabel_by_the_platform_is_allowed if {
	rev := json.patch(relabel_cases["another workload type"][0], [{"op": "add", "path": "/request/userInfo", "value": {"username": testing.config.platform.controller_service_account}}])
	not "pod-relabel" in rules(rev)
}

test_pod_relabel_without_the_old_object_is_refused if {
	rev := json.remove(relabel_cases["a label of the user's own"][0], ["request/oldObject"])
	"pod-relabel" in rules(rev)
}
