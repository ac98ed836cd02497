package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

# Evaluates a rule of the gate with a month-to-date spend document.
with_spend(rev, spend, rule) := result if {
	result := admission[rule] with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
}

spent(team, usd) := {team: {"month": testing.month, "usd": usd, "updated_at": testing.now}}

rules_with_spend(rev, spend) := {split(m, ":")[0] | some m in with_spend(rev, spend, "deny")}

near(x, want) if abs(x - want) < 0.01

# 8 H100 on demand for the training default of 24 hours: 8 x 12.29 x 24 = 2359.68.
eight_h100_day := 2359.68

estimate_cases := {
	"on-demand pod at the type's default runtime": {"input": testing.pod(testing.training), "want": eight_h100_day},
	"deployment replicas": {"input": testing.deployment(testing.training, 2), "want": 2 * eight_h100_day},
	"job deadline": {"input": testing.job(testing.training, {"activeDeadlineSeconds": 3600}), "want": 98.32},
	"spot batch at spot price": {"input": testing.pod(testing.batch), "want": 13.2},
	"no model selected prices the team default": {"input": testing.pod(testing.without_spec_field(testing.training, "nodeSelector")), "want": 704.64},
	"another family prices its dearest model": {"input": testing.pod(testing.replace_spec(testing.with_limits(testing.training, {"google.com/tpu": "4"}), "nodeSelector", {})), "want": 115.2},
	"dearest of the selected models": {
		"input": testing.pod(testing.with_spec(testing.without_spec_field(testing.training, "nodeSelector"), {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-A100-SXM4-40GB", "NVIDIA-H100-80GB-HBM3"]}]}]}}}})),
		"want": eight_h100_day,
	},
	"mig devices are priced as whole gpus": {
		"input": testing.pod(testing.with_limits(testing.training, {"nvidia.com/mig-1g.10gb": "2", "nvidia.com/gpu": "1"})),
		"want": (3 * eight_h100_day) / 8,
	},
}

test_estimate[name] if {
	some name, tc in estimate_cases
	near(with_spend(tc.input, {}, "estimate_usd"), tc.want)
}

budget_cases := {
	"well under budget": {"input": testing.pod(testing.training), "spend": spent("research", 30000), "deny": set(), "warnings": 0},
	"over the warning line": {"input": testing.pod(testing.training), "spend": spent("research", 38000), "deny": set(), "warnings": 1},
	"over the budget": {"input": testing.pod(testing.training), "spend": spent("research", 48000), "deny": {"budget"}, "warnings": 0},
	# Issue 19: the budget_exempt type alone, or the team's list alone, no
	# longer exempts (both were admitted with a warning).
	"budget-exempt type the team does not list, over the budget": {"input": testing.pod_in(testing.inference, "ml-serving"), "spend": spent("serving", 29999), "deny": {"budget"}, "warnings": 0},
	"type the team lists but that is not budget_exempt, over the budget": {
		"input": testing.pod_in(testing.notebook, "analytics"),
		"spend": spent("analytics", 5000),
		"deny": {"budget"}, "warnings": 0,
	},
	"spend of another month": {
		"input": testing.pod(testing.training),
		"spend": {"research": {"month": "2026-10", "usd": 900000}},
		"deny": set(), "warnings": 0,
	},
	"another team's spend": {"input": testing.pod(testing.training), "spend": spent("serving", 900000), "deny": set(), "warnings": 0},
	"malformed spend": {"input": testing.pod(testing.training), "spend": {"research": {"month": testing.month, "usd": "lots"}}, "deny": {"budget"}, "warnings": 0},
	"spend without a month": {"input": testing.pod(testing.training), "spend": {"research": {"usd": 1}}, "deny": {"budget"}, "warnings": 0},
	"updates are not priced": {
		"input": testing.as_update(testing.deployment(testing.training, 1), {}),
		"spend": spent("research", 900000),
		"deny": set(), "warnings": 0,
	},
	"cpu pods are not priced": {"input": testing.pod(testing.cpu), "spend": spent("research", 900000), "deny": set(), "warnings": 0},
}

test_budget[name] if {
	some name, tc in budget_cases
	rules_with_spend(tc.input, tc.spend) == tc.deny
	count(with_spend(tc.input, tc.spend, "warnings")) == tc.warnings
}

test_budget_deny_message if {
	msgs := with_spend(testing.pod(testing.training), spent("research", 48000), "deny")
	msgs == {"budget: team research would reach 101% of its monthly budget ($48000 spent this month + $2360 estimated for this workload, budget $50000), over the 100% limit; lower the devices, replicas or activeDeadlineSeconds, or ask the platform team for more budget"}
}

test_budget_warning_message if {
	with_spend(testing.pod(testing.training), spent("research", 38000), "warnings") == {"budget: team research would reach 81% of its monthly budget ($38000 spent this month + $2360 estimated for this workload, budget $50000), over the 80% warning line"}
}

serving_exempts_inference := object.union(testing.config, {"teams": {"serving": {"budget_exempt_types": ["inference"]}}})

test_budget_exempt_warning_message if {
	warnings := admission.warnings with input as testing.pod_in(testing.inference, "ml-serving")
		with data.fleetplane.config as serving_exempts_inference
		with data.fleetplane.spend as spent("serving", 29999)
		with time.now_ns as testing.now_ns
	some w in warnings
	endswith(w, "admitted because inference workloads are exempt from the budget limit")
	denials := admission.deny with input as testing.pod_in(testing.inference, "ml-serving")
		with data.fleetplane.config as serving_exempts_inference
		with data.fleetplane.spend as spent("serving", 29999)
		with time.now_ns as testing.now_ns
	denials == set()
}

test_malformed_spend_message_names_the_document if {
	some m in with_spend(testing.pod(testing.training), {"research": {"month": testing.month, "usd": "lots"}}, "deny")
	startswith(m, "budget: data.fleetplane.spend.research must be")
}

test_budget_is_evaluated_before_allowing if {
	not with_spend(testing.pod(testing.training), {"research": {"month": testing.month, "usd": "lots"}}, "budget_evaluated")
	with_spend(testing.pod(testing.training), {}, "budget_evaluated")
}
