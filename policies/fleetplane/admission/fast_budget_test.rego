# The fast path's budget (fast_budget.rego): spend, reservations, the
# budget's warnings and denials and the exemption, against the full rules.
package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

# Under both lines the fast path only answers when the warning line is at or
# under the limit; otherwise the full rules judge (and allow).
test_fast_path_leaves_inverted_budget_lines_to_the_full_rules if {
	rev := testing.pod(training)
	inverted := object.union(testing.config, {"budget": {"warn_ratio": 1.0, "deny_ratio": 0.8}})
	not admission.fast_allowed with input as rev
		with data.fleetplane.config as inverted
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
	admission.allowed with input as rev
		with data.fleetplane.config as inverted
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

# Spend decides between the fast path and the full rules: under the warning
# line the fast path answers; at a warning, a denial, a malformed or unusual
# record, the full rules do.
spend_cases := {
	"stale month": [{"research": {"month": "2026-10", "usd": 1000000}}, true],
	"well under": [spent("research", 1000), true],
	"over the warning line": [spent("research", 39000), true],
	"over the budget": [spent("research", 60000), false],
	"malformed": [spent("research", "lots"), false],
	"not an object": [[1], false],
	"no usd for a stale month": [{"research": {"month": "2026-10"}}, false],
}

test_fast_path_and_spend[name] if {
	some name, [spend, want] in spend_cases
	rev := testing.pod(training)
	fast_answer := count({1 | fast(rev, spend)}) == 1
	fast_answer == want
}

# Inference has no default runtime, and team research is exempt from the
# budget for it: nothing bounds an inference pod in time, and it is allowed
# with the exemption warning (as the replay's serving team is).
unbounded_exempt := object.union(testing.config, {
	"workload_types": {"inference": {"default_max_runtime_seconds": null}},
	"teams": {"research": {"budget_exempt_types": ["inference"]}},
})

unbounded_exempt_cases := {
	"inference pod": testing.pod(testing.inference),
	"inference deployment by affinity": testing.deployment(by_models(testing.inference, [h100_value, a100_value]), 2),
}

test_fast_path_allows_an_unbounded_workload_of_an_exempt_team_like_the_full_rules[name] if {
	some name, rev in unbounded_exempt_cases
	every spend in [{}, spent("research", 39000), spent("research", 60000), {"research": {"month": "2026-10", "usd": 1000000}}] {
		unbounded_answer_agrees(rev, unbounded_exempt, spend)
	}
}

unbounded_answer_agrees(rev, config, spend) if {
	fast := admission.fast_response with input as rev
		with data.fleetplane.config as config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
	fast.allowed == true
	[warning] := fast.warnings
	contains(warning, "nothing bounds how long the pods of")
	endswith(warning, "admitted because team research is exempt from the budget limit for inference workloads")
	fast == data.system.full_response with input as rev
		with data.fleetplane.config as config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
}

# Without the exemption the full rules deny it; with a malformed spend
# record (which they check even without an estimate) too.
test_fast_path_leaves_unbounded_workloads_to_the_full_rules[name] if {
	some name, [config, spend] in {
		"not exempt": [json.patch(unbounded_exempt, [{"op": "replace", "path": "/teams/research/budget_exempt_types", "value": []}]), {}],
		"malformed spend": [unbounded_exempt, spent("research", "lots")],
		"spend not a record": [unbounded_exempt, {"research": 5}],
	}
	rev := unbounded_exempt_cases["inference pod"]
	not admission.fast_response with input as rev
		with data.fleetplane.config as config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
	full := data.system.full_response with input as rev
		with data.fleetplane.config as config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
	full.allowed == false
	startswith(full.status.message, "budget: ")
}

contract_reservations := {"research": {"uid-a": {"usd": 30000, "expires_at": testing.now + 60}}}

test_fast_path_agrees_with_reservations if {
	every rev in object.union(object.union(common_cases, affinity_cases), refused_cases) {
		same_response(rev, testing.config, contract_reservations)
	}
}

same_response(rev, config, reservations) if {
	not admission.fast_response with input as rev
		with data.fleetplane.config as config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with data.fleetplane.reservations as reservations
		with time.now_ns as testing.now_ns
}

same_response(rev, config, reservations) if {
	fast := admission.fast_response with input as rev
		with data.fleetplane.config as config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with data.fleetplane.reservations as reservations
		with time.now_ns as testing.now_ns
	fast == data.system.full_response with input as rev
		with data.fleetplane.config as config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with data.fleetplane.reservations as reservations
		with time.now_ns as testing.now_ns
}

test_fast_path_takes_reservations_into_account if {
	rev := testing.pod(training)
	warnings := admission.fast_warnings with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spent("research", 10000)
		with data.fleetplane.reservations as contract_reservations
		with time.now_ns as testing.now_ns
	count(warnings) == 1
	contains(warnings[0], "+ $30000 reserved for workloads admitted since")
}

test_fast_path_answers_a_budget_warning_like_the_full_rules if {
	rev := testing.pod(training)
	spend := spent("research", 39000)
	answer := data.system.main with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
	warnings := with_spend(rev, spend, "warning_list")
	count(warnings) == 1
	startswith(warnings[0], "budget: team research would reach 83% of its monthly budget")
	answer.response == {"uid": rev.request.uid, "allowed": true, "warnings": warnings}
}

# Over the limit the fast path denies with the full rules' message (a fifth
# of the full-rule reviews of the benchmark's trace requests were these).
test_fast_path_denies_over_the_budget_like_the_full_rules if {
	rev := testing.pod(training)
	spend := spent("research", 60000)
	fast := admission.fast_response with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
	fast.allowed == false
	startswith(fast.status.message, "budget: team research would reach ")
	contains(fast.status.message, "over the 100% limit")
	fast == data.system.full_response with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
}

test_fast_path_gives_the_exemption_warning if {
	rev := testing.deployment(testing.inference, 1)
	spend := spent("research", 60000)
	exempting := object.union(testing.config, {"teams": {"research": {"budget_exempt_types": ["inference"]}}})
	fast_warnings := admission.fast_warnings with input as rev
		with data.fleetplane.config as exempting
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
	fast_warnings == admission.warning_list with input as rev
		with data.fleetplane.config as exempting
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
	contains(fast_warnings[0], "admitted because inference workloads are exempt")
}
