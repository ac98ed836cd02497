package fleetplane.admission_test

import data.fleetplane.testing

own_sa := "system:serviceaccount:ml-research:default"

sa_running_pod := testing.pod(testing.training).request.object

sa_pod_with(annotations) := testing.pod(testing.with_annotations(testing.training, annotations))

by_sa(rev, who) := testing.by(rev, who, ["system:serviceaccounts", "system:serviceaccounts:ml-research"])

sa_checkpoint_cases := {
	"its own ServiceAccount records a checkpoint": [by_sa(testing.as_update(sa_pod_with({"fleetplane.dev/last-checkpoint": "1795000000"}), sa_running_pod), own_sa), set()],
	"its own ServiceAccount also writes another annotation": [by_sa(testing.as_update(sa_pod_with({"fleetplane.dev/last-checkpoint": "1795000000", "team.example/step": "500"}), sa_running_pod), own_sa), {"checkpoint"}],
	"its own ServiceAccount relabels the pod": [by_sa(testing.as_update(testing.pod(testing.with_labels(testing.training, {"app": "other"})), sa_running_pod), own_sa), {"checkpoint"}],
	"its own ServiceAccount writes a platform-owned key with the checkpoint": [by_sa(testing.as_update(sa_pod_with({"fleetplane.dev/last-checkpoint": "1795000000", "fleetplane.dev/reclaim-deadline": "1"}), sa_running_pod), own_sa), {"checkpoint", "platform-owned"}],
	"a person of the team writes another annotation": [testing.as_update(sa_pod_with({"team.example/step": "500"}), sa_running_pod), set()],
	"a ServiceAccount of another namespace": [by_sa(testing.as_update(sa_pod_with({"team.example/step": "500"}), sa_running_pod), "system:serviceaccount:tools:bot"), set()],
}

test_sa_checkpoint[name] if {
	some name, [rev, want] in sa_checkpoint_cases
	rules(rev) == want
}

test_sa_checkpoint_message_names_what_else_changed if {
	some_message(sa_checkpoint_cases["its own ServiceAccount also writes another annotation"][0], "checkpoint: ServiceAccount system:serviceaccount:ml-research:default may change only the annotation fleetplane.dev/last-checkpoint of a pod (to record a checkpoint: fleetplane checkpoint); this update also changes annotation team.example/step")
}
