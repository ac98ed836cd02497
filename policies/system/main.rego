# METADATA
# title: Admission webhook entry point
# description: >-
#   OPA's default decision (POST / with the AdmissionReview as the body, also
#   served at /v1/data/system/main): a complete AdmissionReview response built
#   from fleetplane.admission, so the API server can use OPA as a validating
#   webhook directly.
package system

import data.fleetplane.admission

# METADATA
# entrypoint: true
# description: The AdmissionReview sent back to the API server.
main := {
	"apiVersion": "admission.k8s.io/v1",
	"kind": "AdmissionReview",
	"response": response,
}

# METADATA
# description: >-
#   uid echoes the request; status carries one message per violated rule,
#   joined by newlines; warnings appear only when there are some. The common
#   case is answered by the fast path (fleetplane.admission.fast_response),
#   everything else by the full rules.
response := fast if {
	fast := admission.fast_response
} else := full_response

# METADATA
# description: The response from the full rules alone.
full_response := object.union(
	{"uid": admission.uid, "allowed": admission.allowed},
	object.union(status, warnings),
)

status := {} if {
	admission.allowed
} else := {"status": {
	"code": 403,
	"reason": "Forbidden",
	"message": concat("\n", admission.messages),
}}

warnings := {"warnings": admission.warning_list} if {
	count(admission.warning_list) > 0
} else := {}
