# The fast path's security rules (fast_security.rego): registries and
# judged namespaces, against the full rules.
package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

# A registry entry without the trailing "/" is left to the full rules (which
# read it as a whole host and allow the training image).
test_fast_path_leaves_registries_without_a_slash_to_the_full_rules if {
	rev := testing.pod(training)
	hosts := object.union(testing.config, {"registries": ["nvcr.io", "registry.fleetplane.internal/"]})
	not admission.fast_allowed with input as rev
		with data.fleetplane.config as hosts
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
	admission.allowed with input as rev
		with data.fleetplane.config as hosts
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

# A namespace the configuration maps to null is a team namespace for the full
# rules (`in_team_namespace` holds on any value but false), so their security
# rules apply there: the fast path must not skip them.
test_fast_path_applies_the_security_rules_in_a_namespace_mapped_to_null if {
	privileged := testing.replace_spec(testing.cpu, "containers", [{"name": "web", "image": "nvcr.io/x", "securityContext": {"privileged": true}}])
	rev := testing.pod_in(privileged, "odd")
	odd := object.union(testing.config, {"namespaces": {"odd": null}})
	not admission.fast_allowed with input as rev
		with data.fleetplane.config as odd
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
	not admission.allowed with input as rev
		with data.fleetplane.config as odd
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

# An image that only matches an allowed registry once qualified (docker.io
# for a single name) is allowed by the fast path, as by the full rules.
test_fast_path_allows_an_image_allowed_once_qualified if {
	rev := testing.pod(testing.with_spec(testing.cpu, {"containers": [{"name": "web", "image": "python:3"}]}))
	hub := object.union(testing.config, {"registries": array.concat(testing.config.registries, ["docker.io/library/"])})
	fast := admission.fast_response with input as rev
		with data.fleetplane.config as hub
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
	fast == {"uid": rev.request.uid, "allowed": true}
	admission.allowed with input as rev
		with data.fleetplane.config as hub
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

# A registry entry whose first part is no host ("team/" is docker.io/team/
# once qualified) is left to the full rules, which deny an image under it.
test_fast_path_leaves_registries_without_a_host_to_the_full_rules if {
	rev := testing.pod(testing.with_spec(testing.cpu, {"containers": [{"name": "web", "image": "team/web:1"}]}))
	odd := object.union(testing.config, {"registries": array.concat(testing.config.registries, ["team/"])})
	not admission.fast_response with input as rev
		with data.fleetplane.config as odd
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
	not admission.allowed with input as rev
		with data.fleetplane.config as odd
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}
