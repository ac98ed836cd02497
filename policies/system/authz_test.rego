package system.authz_test

import data.system.authz

controller_token := "c0ntr0ller-t0ken"

approver_token := "appr0ver-t0ken"

webhook_token := "apiserver-t0ken"

front_token := "fr0nt-t0ken"

clients := {
	"tokens": {
		crypto.sha256(controller_token): "controller",
		crypto.sha256(approver_token): "approver",
		crypto.sha256(webhook_token): "webhook",
		crypto.sha256(front_token): "front",
	},
	"anonymous": "webhook",
}

# Whether a request is allowed: method, path as OPA splits it, token (null
# for none), the authz document.
allowed(method, path, token, document) if {
	authz.allow with input as request(method, path, token)
		with data.fleetplane.authz as document
}

anonymous_request(method, path) := {"method": method, "path": split(trim_prefix(path, "/"), "/"), "params": {}, "headers": {}}

request(method, path, null) := anonymous_request(method, path)

request(method, path, token) := object.union(anonymous_request(method, path), {"identity": token}) if token != null

# [method, path, token, allowed]
cases := {
	"the webhook asks for an admission decision": ["POST", "/", null, true],
	"the webhook asks at the decision's path": ["POST", "/v1/data/system/main", null, true],
	"the API server with its own token": ["POST", "/", webhook_token, true],
	"the webhook may not read data": ["GET", "/v1/data/fleetplane/config", null, false],
	"the webhook may not ask the controller's decisions": ["POST", "/v1/data/fleetplane/decisions/reclaim", null, false],
	"the webhook may not write spend": ["PUT", "/v1/data/fleetplane/spend", null, false],
	"a trailing slash is another path": ["POST", "/v1/data/system/main/", null, false],
	"the controller asks its decisions": ["POST", "/v1/data/fleetplane/decisions/reclaim/decision", controller_token, true],
	"the controller asks an admission decision": ["POST", "/", controller_token, true],
	"the controller writes spend": ["PUT", "/v1/data/fleetplane/spend", controller_token, true],
	"the controller patches spend": ["PATCH", "/v1/data/fleetplane/spend", controller_token, true],
	"the controller reads spend": ["GET", "/v1/data/fleetplane/spend/research", controller_token, true],
	"the controller keeps reservations": ["PUT", "/v1/data/fleetplane/reservations/research", controller_token, true],
	"the controller drops a reservation": ["DELETE", "/v1/data/fleetplane/reservations/research/uid-1", controller_token, true],
	"the controller keeps workload records": ["PATCH", "/v1/data/fleetplane/workloads", controller_token, true],
	"the controller replaces every record at once": ["PUT", "/v1/data/fleetplane/workloads", controller_token, true],
	"the controller keeps claim records": ["PATCH", "/v1/data/fleetplane/claims", controller_token, true],
	"the webhook may not write claim records": ["PUT", "/v1/data/fleetplane/claims", null, false],
	"the controller replaces every reservation at once": ["PUT", "/v1/data/fleetplane/reservations", controller_token, true],
	"the controller reads the approvals it binds": ["GET", "/v1/data/fleetplane/approvals", controller_token, true],
	"the controller may not bind approvals wholesale": ["PUT", "/v1/data/fleetplane/approvals", controller_token, false],
	"the controller binds an approval": ["PUT", "/v1/data/fleetplane/approvals/APR-1/uid", controller_token, true],
	"the controller may not grant approvals": ["PUT", "/v1/data/fleetplane/approvals/APR-1", controller_token, false],
	"the controller reads the revision OPA loaded": ["GET", "/v1/data/fleetplane/revision", controller_token, true],
	"the controller may not write the revision": ["PUT", "/v1/data/fleetplane/revision", controller_token, false],
	"the webhook may not read the revision": ["GET", "/v1/data/fleetplane/revision", null, false],
	"the controller may not rewrite the configuration": ["PUT", "/v1/data/fleetplane/config", controller_token, false],
	"the controller may not replace the whole tree": ["PUT", "/v1/data/fleetplane", controller_token, false],
	"the controller may not patch the root": ["PATCH", "/v1/data", controller_token, false],
	"the controller may not write policies": ["PUT", "/v1/policies/x", controller_token, false],
	"the controller may not run ad hoc queries": ["POST", "/v1/query", controller_token, false],
	"the controller may not delete spend": ["DELETE", "/v1/data/fleetplane/spend", controller_token, false],
	"an approver grants an approval": ["PUT", "/v1/data/fleetplane/approvals/APR-1", approver_token, true],
	"an approver may not write spend": ["PUT", "/v1/data/fleetplane/spend", approver_token, false],
	"the front asks an admission decision": ["POST", "/", front_token, true],
	"the front asks a workload's reservation": ["POST", "/v1/data/fleetplane/admission/admission_reservation", front_token, true],
	"the front writes an admitted entry": ["PUT", "/v1/data/fleetplane/admitted/research/uid-1", front_token, true],
	"the front deletes a lapsed entry": ["DELETE", "/v1/data/fleetplane/admitted/research/uid-1", front_token, true],
	"the front may not replace a team's entries": ["PUT", "/v1/data/fleetplane/admitted/research", front_token, false],
	"the front may not replace every entry": ["PUT", "/v1/data/fleetplane/admitted", front_token, false],
	"the front may not write under an entry": ["PUT", "/v1/data/fleetplane/admitted/research/uid-1/usd", front_token, false],
	"the front may not patch entries": ["PATCH", "/v1/data/fleetplane/admitted/research/uid-1", front_token, false],
	"the front may not read the entries": ["GET", "/v1/data/fleetplane/admitted/research/uid-1", front_token, false],
	"the front may not ask other admission data": ["POST", "/v1/data/fleetplane/admission/deny", front_token, false],
	"the front may not write reservations": ["PUT", "/v1/data/fleetplane/reservations/research/uid-1", front_token, false],
	"the front may not write spend": ["PUT", "/v1/data/fleetplane/spend", front_token, false],
	"the front may not ask the controller's decisions": ["POST", "/v1/data/fleetplane/decisions/reclaim", front_token, false],
	"the controller may not write admitted entries": ["PUT", "/v1/data/fleetplane/admitted/research/uid-1", controller_token, false],
	"the webhook may not write admitted entries": ["PUT", "/v1/data/fleetplane/admitted/research/uid-1", null, false],
	"an unknown token": ["POST", "/", "guess", false],
	"nobody writes policies": ["PUT", "/v1/policies/fleetplane/admission", null, false],
	"nobody reads policies": ["GET", "/v1/policies", null, false],
	"health is open": ["GET", "/health", null, true],
	"readiness is open": ["GET", "/health/ready", null, true],
	"health is only read": ["POST", "/health", null, false],
	"metrics need a role": ["GET", "/metrics", null, false],
}

test_authz[name] if {
	some name, [method, path, token, want] in cases
	got := count({1 | allowed(method, path, token, clients)}) == 1
	got == want
}

test_no_anonymous_role_where_the_api_server_presents_a_token if {
	document := object.union(clients, {"anonymous": null})
	not allowed("POST", "/", null, document)
	allowed("POST", "/", webhook_token, document)
}

test_no_authz_document_allows_only_health if {
	not authz.allow with input as request("POST", "/", null)
	authz.allow with input as request("GET", "/health", null)
}

test_metrics_role if {
	document := object.union(clients, {"tokens": {crypto.sha256("prometheus"): "metrics"}})
	allowed("GET", "/metrics", "prometheus", document)
	not allowed("GET", "/v1/data", "prometheus", document)
}
