package system_test

import data.fleetplane.testing
import data.system

main(rev, spend) := result if {
	result := system.main with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
}

test_allowed_review if {
	main(testing.pod(testing.training), {}) == {
		"apiVersion": "admission.k8s.io/v1",
		"kind": "AdmissionReview",
		"response": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": true},
	}
}

test_denied_review_lists_one_message_per_rule if {
	rev := testing.pod(testing.with_spec(testing.training, {"priorityClassName": "none", "hostPID": true}))
	response := main(rev, {}).response
	response.allowed == false
	response.status.code == 403
	response.status.reason == "Forbidden"
	lines := split(response.status.message, "\n")
	count(lines) == 2
	startswith(lines[0], "host-namespaces: ")
	startswith(lines[1], "priority-class: ")
	not response.warnings
}

test_warnings_are_returned_with_an_allowed_review if {
	spend := {"research": {"month": testing.month, "usd": 38000}}
	response := main(testing.pod(testing.training), spend).response
	response.allowed == true
	count(response.warnings) == 1
	startswith(response.warnings[0], "budget: ")
	not response.status
}

test_garbage_is_denied_with_an_empty_uid if {
	response := main("garbage", {}).response
	response.uid == ""
	response.allowed == false
	contains(response.status.message, "malformed-request: the body must be an AdmissionReview object")
}

test_missing_request_is_denied if {
	response := main({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, {}).response
	response.allowed == false
	response.status.message == "malformed-request: request is missing"
}
