package fleetplane.budget_test

import data.fleetplane.budget
import data.fleetplane.testing

now := testing.now_ns

month_cases := {
	"fixture clock": [testing.now_ns, "2026-11"],
	"first second of a year": [1798761600000000000, "2027-01"],
	"last second of a year": [1798761599000000000, "2026-12"],
}

test_month[name] if {
	some name, [ns, want] in month_cases
	budget.month(ns) == want
}

test_month_now if {
	budget.month_now == "2026-11" with time.now_ns as testing.now_ns
}

spend_doc := {
	"research": {"month": "2026-11", "usd": 1234.5},
	"serving": {"month": "2026-10", "usd": 99999},
	"analytics": {"month": "2026-11", "usd": -5},
	"broken": {"usd": 10},
}

spent_cases := {
	"this month": ["research", 1234.5],
	"last month counts as zero": ["serving", 0],
	"absent team counts as zero": ["nobody", 0],
}

test_spent[name] if {
	some name, [team, want] in spent_cases
	budget.spent(team, now) == want with data.fleetplane.spend as spend_doc
}

test_malformed_spend_is_undefined_and_reported[team] if {
	some team in ["analytics", "broken"]
	not budget.spent(team, now) with data.fleetplane.spend as spend_doc
	count(budget.spend_problems(team, now)) == 1 with data.fleetplane.spend as spend_doc
}

test_well_formed_spend_has_no_problem if {
	budget.spend_problems("research", now) == set() with data.fleetplane.spend as spend_doc
}

test_no_spend_document_at_all if {
	budget.spent("research", now) == 0
}

test_estimate_usd if {
	budget.estimate_usd([]) == 0
	budget.estimate_usd([
		{"devices": 2, "price_per_hour_usd": 10, "seconds": 7200},
		{"devices": 1, "price_per_hour_usd": 4, "seconds": 1800},
	]) == 42
}

# Issue 19: the configuration model's meaning (components/config.py): a
# type's budget_exempt lets teams list it, a team's budget_exempt_types lists
# the types that keep running over budget; it takes both. Before, either
# alone exempted ("type exempt" and "team exempts the type" were true).
exempt_cases := {
	"type exempt, listed by no team": ["research", "inference", false],
	"team lists a type that is not budget_exempt": ["analytics", "notebook", false],
	"team lists a budget_exempt type": ["serving", "inference", true],
	"another team lists it": ["research", "inference", false],
	"other team": ["research", "notebook", false],
	"not exempt": ["research", "training", false],
}

# The fixture with team serving listing inference, as the model allows.
serving_exempts_inference := object.union(testing.config, {"teams": {"serving": {"budget_exempt_types": ["inference"]}}})

exempt(team, workload_type) if {
	budget.exempt(team, workload_type) with data.fleetplane.config as serving_exempts_inference
} else := false

test_exempt[name] if {
	some name, [team, workload_type, want] in exempt_cases
	exempt(team, workload_type) == want
}

# research: budget 50000, warn above 40000, deny above 50000.
level_cases := {
	"well under": [10000, 0, "ok"],
	"exactly at the warning line": [30000, 10000, "ok"],
	"over the warning line": [30000, 10001, "warn"],
	"exactly at the budget": [40000, 10000, "warn"],
	"over the budget": [40000, 10001, "deny"],
}

test_level[name] if {
	some name, [usd, estimate, want] in level_cases
	v := budget.verdict("research", "training", estimate, now, set()) with data.fleetplane.config as testing.config
		with data.fleetplane.spend as {"research": {"month": "2026-11", "usd": usd}}
	v.level == want
	v.total_usd == usd + estimate
}

test_exempt_type_over_budget_is_exempt if {
	v := budget.verdict("serving", "inference", 60000, now, set()) with data.fleetplane.config as serving_exempts_inference
	v.level == "exempt"
}

test_budget_exempt_type_not_listed_by_the_team_is_denied if {
	v := budget.verdict("research", "inference", 60000, now, set()) with data.fleetplane.config as testing.config
	v.level == "deny"
}

test_zero_budget_denies_any_cost if {
	config := object.union(testing.config, {"teams": {"research": {"monthly_budget_usd": 0}}})
	v := budget.verdict("research", "training", 1, now, set()) with data.fleetplane.config as config
	v.level == "deny"
	budget.percent(v) == "more than all"
}

has_verdict(config) if {
	budget.verdict("research", "training", 1, now, set()) with data.fleetplane.config as config
}

test_verdict_is_undefined_without_ratios if {
	has_verdict(testing.config)
	not has_verdict(json.remove(testing.config, ["budget"]))
}

test_describe if {
	v := {"total_usd": 45000.4, "spent_usd": 40000.2, "estimate_usd": 5000.2, "budget_usd": 50000}
	budget.describe("research", v) == "team research would reach 90% of its monthly budget ($40000 spent this month + $5000 estimated for this workload, budget $50000)"
}

reservation_doc := {"research": {
	"uid-a": {"usd": 100, "expires_at": testing.now + 1},
	"uid-b": {"usd": 50, "expires_at": testing.now, "uids": []},
	"uid-c": {"usd": 25, "expires_at": testing.now + 1, "uids": ["uid-rs"]},
}}

reserved_cases := {
	"unexpired entries": [set(), 125],
	"an entry keyed by the object": [{"uid-a"}, 25],
	"an entry covering the object": [{"uid-rs"}, 100],
}

test_reserved[name] if {
	some name, [uids, want] in reserved_cases
	budget.reserved("research", now, uids) == want with data.fleetplane.reservations as reservation_doc
}

# The same reservations by expiry, as the controller writes them: the gate
# reads the buckets and the object's own entries only.
by_expiry_doc := {"research": {
	"expiring": {sprintf("%d", [testing.now + 1]): 125, sprintf("%d", [testing.now]): 50},
	"workloads": reservation_doc.research,
	"owners": {"uid-rs": "uid-c"},
}}

test_reserved_by_expiry[name] if {
	some name, [uids, want] in reserved_cases
	budget.reserved("research", now, uids) == want with data.fleetplane.reservations as by_expiry_doc
}

test_reserved_by_expiry_malformed_is_undefined[name] if {
	some name, doc in {
		"bucket not a number": {"expiring": {"1": "x"}, "workloads": {}, "owners": {}},
		"bucket not a time": {"expiring": {"soon": 1}, "workloads": {}, "owners": {}},
		"own entry malformed": {"expiring": {"1": 1}, "workloads": {"uid-a": {"usd": "1"}}, "owners": {}},
	}
	not budget.reserved("research", now, {"uid-a"}) with data.fleetplane.reservations as {"research": doc}
	count(budget.reservation_problems("research", now, {"uid-a"})) == 1 with data.fleetplane.reservations as {"research": doc}
}

test_reserved_without_entries if {
	budget.reserved("serving", now, set()) == 0 with data.fleetplane.reservations as reservation_doc
	budget.reserved("research", now, set()) == 0
}

test_malformed_reservations_are_undefined_and_reported[name] if {
	some name, entries in {
		"usd not a number": {"x": {"usd": "1", "expires_at": 1}},
		"negative usd": {"x": {"usd": -1, "expires_at": 1}},
		"no expiry": {"x": {"usd": 1}},
		"uids not a list": {"x": {"usd": 1, "expires_at": 1, "uids": "y"}},
		"not a map": [1],
	}
	not budget.reserved("research", now, set()) with data.fleetplane.reservations as {"research": entries}
	count(budget.reservation_problems("research", now, set())) == 1 with data.fleetplane.reservations as {"research": entries}
}

test_verdict_adds_reservations if {
	v := budget.verdict("research", "training", 10, now, set()) with data.fleetplane.config as testing.config
		with data.fleetplane.spend as {"research": {"month": "2026-11", "usd": 1000}}
		with data.fleetplane.reservations as reservation_doc
	v.total_usd == 1135
	v.reserved_usd == 125
}

test_describe_with_reservations if {
	v := {"total_usd": 45000.4, "spent_usd": 40000.2, "reserved_usd": 3000, "estimate_usd": 2000.2, "budget_usd": 50000}
	budget.describe("research", v) == "team research would reach 90% of its monthly budget ($40000 spent this month + $3000 reserved for workloads admitted since + $2000 estimated for this workload, budget $50000)"
}
