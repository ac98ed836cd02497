# METADATA
# title: Who may use OPA's own API
# description: >-
#   OPA's authorization policy (opa run --authentication=token
#   --authorization=basic): every HTTP request to OPA is allowed only when
#   data.system.authz.allow is true. Identities are bearer tokens, known by
#   their SHA-256 in data.fleetplane.authz (a file the deployment provides at
#   startup; the tokens themselves stay in Secrets); what each role may do is
#   here, in policy. The API server's webhook may only ask for admission
#   decisions; the controller may also ask for its decisions and write the
#   documents it keeps (spend, reservations, workload records, the workload an
#   approval is bound to); the admission front may ask for admission decisions
#   and a workload's reservation, and write or delete one admitted entry
#   (data.fleetplane.admitted.<team>.<uid>) at a time, nothing else; approvers
#   may write approvals; nobody may write policies or any other data. Health endpoints are open.
package system.authz

# METADATA
# entrypoint: true
# description: True for a request the caller's roles grant (or a health check).
default allow := false

# The hot path first (OPA stops at the first body that allows): the API
# server's AdmissionReview at OPA's default decision, from a caller whose
# role decides admission (see grants).
allow if {
	input.method == "POST"
	input.path == [""]
	admission_caller
}

admission_caller if {
	not input.identity
	data.fleetplane.authz.anonymous in {"webhook", "controller"}
}

admission_caller if data.fleetplane.authz.tokens[crypto.sha256(input.identity)] in {"webhook", "controller", "front"}

# Probes need no identity (the kubelet's carry none).
allow if {
	input.method == "GET"
	input.path[0] == "health"
}

allow if {
	some role in roles
	some grant in grants[role]
	input.method in grant.methods
	path_matches(grant.path, grant.prefix, input.path)
}

# METADATA
# description: >-
#   The caller's roles: the role of its bearer token (data.fleetplane.authz.tokens
#   maps the hex SHA-256 of a token to a role), or, for a request without
#   one, data.fleetplane.authz.anonymous (the role of callers that cannot
#   present a token: "webhook" where the API server of a managed control
#   plane calls the webhook without credentials; null otherwise). An unknown
#   token has no role.
roles contains role if {
	token := input.identity
	is_string(token)
	role := data.fleetplane.authz.tokens[crypto.sha256(token)]
}

roles contains role if {
	not input.identity
	role := data.fleetplane.authz.anonymous
	is_string(role)
}

# METADATA
# description: >-
#   What each role may do: methods on a path, the path exact or a prefix
#   ("*" matches any one segment). Every role that decides admission may ask
#   at OPA's default decision (POST /) and at its path. A literal: the policy
#   runs on every request, and a constant costs it nothing.
grants := {
	"webhook": [
		{"methods": {"POST"}, "path": [""], "prefix": false},
		{"methods": {"POST"}, "path": ["v1", "data", "system", "main"], "prefix": false},
	],
	"controller": [
		{"methods": {"POST"}, "path": [""], "prefix": false},
		{"methods": {"POST"}, "path": ["v1", "data", "system", "main"], "prefix": false},
		{"methods": {"POST"}, "path": ["v1", "data", "fleetplane", "decisions"], "prefix": true},
		{"methods": {"GET", "PUT", "PATCH"}, "path": ["v1", "data", "fleetplane", "spend"], "prefix": true},
		{"methods": {"GET", "PUT", "PATCH", "DELETE"}, "path": ["v1", "data", "fleetplane", "reservations"], "prefix": true},
		{"methods": {"GET", "PUT", "PATCH", "DELETE"}, "path": ["v1", "data", "fleetplane", "workloads"], "prefix": true},
		{"methods": {"GET", "PUT", "PATCH", "DELETE"}, "path": ["v1", "data", "fleetplane", "claims"], "prefix": true},
		{"methods": {"GET"}, "path": ["v1", "data", "fleetplane", "approvals"], "prefix": true},
		{"methods": {"PUT"}, "path": ["v1", "data", "fleetplane", "approvals", "*", "uid"], "prefix": false},
		# what OPA loaded, which the disruption answers the controller keeps are kept under
		{"methods": {"GET"}, "path": ["v1", "data", "fleetplane", "revision"], "prefix": false},
	],
	# The admission front (controller/admission_front.py) stands where the API
	# server calls the gate and reserves what it admits: one entry by its exact
	# depth (team, uid), never the team's document or the whole of admitted, so
	# it cannot drop the entries of other workloads or write anything the
	# controller keeps.
	"front": [
		{"methods": {"POST"}, "path": [""], "prefix": false},
		{"methods": {"POST"}, "path": ["v1", "data", "fleetplane", "admission", "admission_reservation"], "prefix": false},
		{"methods": {"PUT", "DELETE"}, "path": ["v1", "data", "fleetplane", "admitted", "*", "*"], "prefix": false},
	],
	"approver": [{"methods": {"GET", "PUT", "PATCH", "DELETE"}, "path": ["v1", "data", "fleetplane", "approvals"], "prefix": true}],
	"metrics": [{"methods": {"GET"}, "path": ["metrics"], "prefix": false}],
}

# METADATA
# description: >-
#   True when a request path (the URL's segments) is the pattern, or under it
#   when prefix is true. A trailing empty segment (a trailing slash) is part
#   of the path: "/v1/data/system/main/" is not the admission decision.
path_matches(pattern, false, path) if {
	count(path) == count(pattern)
	segments_match(pattern, path)
}

path_matches(pattern, true, path) if {
	count(path) >= count(pattern)
	segments_match(pattern, path)
}

segments_match(pattern, path) if {
	every i, segment in pattern {
		segment in {"*", path[i]}
	}
}
