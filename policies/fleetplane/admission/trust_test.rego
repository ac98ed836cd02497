package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

exempt_label := {"fleetplane.dev/exempt": "true"}

exempt_training := testing.with_labels(testing.training, exempt_label)

warned := {"fleetplane.dev/idle-warned-at": "1795000000", "fleetplane.dev/reclaim-deadline": "1795001800"}

admin(rev) := testing.by(rev, "carol@example.com", ["fleetplane-admins", "system:authenticated"])

trust_cases := {
	"a user labels a pod exempt": [testing.pod(exempt_training), {"platform-owned"}],
	"a user marks a pod not preemptible": [testing.pod(testing.with_labels(testing.training, {"fleetplane.dev/preemptible": "false"})), {"platform-owned"}],
	"a user writes the controller's idle warning": [testing.pod(testing.with_annotations(testing.notebook, warned)), {"platform-owned"}],
	"a user puts the label in a deployment's template": [testing.deployment(exempt_training, 1), {"platform-owned"}],
	"a user puts the label on the deployment itself": [object.union(testing.deployment(testing.training, 1), {"request": {"object": {"metadata": {"labels": exempt_label}}}}), {"platform-owned"}],
	"a user joins a pod to a PodGroup": [testing.pod(testing.with_annotations(testing.cpu, {"scheduling.k8s.io/group-name": "pg-1"})), {"platform-owned"}],
	"a user forges a reclaim record": [object.union(testing.deployment(testing.cpu, 1), {"request": {"object": {"metadata": {"annotations": {"fleetplane.dev/reclaimed-replicas": "40"}}}}}), {"platform-owned"}],
	"a platform admin labels a pod exempt": [admin(testing.pod(exempt_training)), set()],
	"the controller writes its warning": [testing.by(testing.pod(testing.with_annotations(testing.notebook, warned)), testing.controller, []), set()],
	"the replicaset controller copies a judged template": [testing.by(testing.pod(exempt_training), "system:serviceaccount:kube-system:replicaset-controller", ["system:serviceaccounts"]), set()],
	"keys of the user's own": [testing.pod(testing.with_annotations(testing.training, {"fleetplane.dev/checkpoint-location": "s3://c/r", "fleetplane.dev/last-checkpoint": "1795000000"})), set()],
}

test_trust[name] if {
	some name, [rev, want] in trust_cases
	rules(rev) == want
}

test_trust_message_names_place_and_key if {
	some_message(trust_cases["a user puts the label in a deployment's template"][0], "platform-owned: spec.template.metadata sets label fleetplane.dev/exempt, which only the platform writes")
	some_message(trust_cases["a user labels a pod exempt"][0], "platform-owned: metadata sets label fleetplane.dev/exempt")
}

warned_pod := testing.pod(testing.with_annotations(testing.notebook, warned)).request.object

plain_pod := testing.pod(testing.notebook).request.object

update_trust_cases := {
	"a user removes the idle warning": [testing.as_update(testing.pod(testing.notebook), warned_pod), {"platform-owned"}],
	"a user moves the reclaim deadline": [testing.as_update(testing.pod(testing.with_annotations(testing.notebook, object.union(warned, {"fleetplane.dev/reclaim-deadline": "1899999999"}))), warned_pod), {"platform-owned"}],
	"a user relabels a running pod exempt": [testing.as_update(testing.pod(testing.with_labels(testing.notebook, exempt_label)), plain_pod), {"platform-owned"}],
	"a user changes something else": [testing.as_update(testing.pod(testing.with_annotations(testing.notebook, object.union(warned, {"team.example/owner": "bob"}))), warned_pod), set()],
	"the controller clears its warning": [testing.by(testing.as_update(testing.pod(testing.notebook), warned_pod), testing.controller, []), set()],
	"a user labels a deployment's template exempt": [testing.as_update(testing.deployment(exempt_training, 1), testing.deployment(testing.training, 1).request.object), {"platform-owned"}],
	"a user labels the deployment itself (metadata only)": [
		testing.as_update(object.union(testing.deployment(testing.training, 1), {"request": {"object": {"metadata": {"labels": exempt_label}}}}), testing.deployment(testing.training, 1).request.object),
		{"platform-owned"},
	],
	"a user scales an exempt deployment": [testing.as_update(testing.deployment(exempt_training, 2), testing.deployment(exempt_training, 1).request.object), set()],
}

test_trust_on_update[name] if {
	some name, [rev, want] in update_trust_cases
	rules(rev) == want
}

test_trust_change_message_says_changes if {
	some_message(update_trust_cases["a user removes the idle warning"][0], "platform-owned: metadata changes annotation fleetplane.dev/idle-warned-at")
}

test_platform_requester if {
	admission.platform_requester with input as testing.by(testing.pod(testing.cpu), testing.controller, [])
		with data.fleetplane.config as testing.config
	not admission.platform_requester with input as testing.by(testing.pod(testing.cpu), "", [])
		with data.fleetplane.config as object.union(testing.config, {"platform": {"controller_service_account": ""}})
	not admission.platform_requester with input as testing.pod(testing.cpu)
		with data.fleetplane.config as testing.config
}
