package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

# Evaluates a rule of the gate with a month-to-date spend document.
with_spend(rev, spend, rule) := result if {
	result := admission[rule] with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
}

spent(team, usd) := {team: {"month": testing.month, "usd": usd, "updated_at": testing.now}}

rules_with_spend(rev, spend) := {split(m, ":")[0] | some m in with_spend(rev, spend, "deny")}

near(x, want) if abs(x - want) < 0.01

# 8 H100 on demand for the training default of 24 hours and the pod's
# termination grace (Kubernetes' default, 30 s; issue 33: the grace is priced):
# 8 x 12.29 x (86400 + 30) / 3600 = 2360.50.
eight_h100_day := ((8 * 12.29) * (86400 + 30)) / 3600

# The same for a deadline of an hour and the grace: 99.14.
eight_h100_hour := ((8 * 12.29) * (3600 + 30)) / 3600

estimate_cases := {
	"on-demand pod at the type's default runtime": {"input": testing.pod(testing.training), "want": eight_h100_day},
	"deployment replicas": {"input": testing.deployment(testing.training, 2), "want": 2 * eight_h100_day},
	"job deadline": {"input": testing.job(testing.training, {"activeDeadlineSeconds": 3600}), "want": eight_h100_hour},
	"spot batch at spot price": {"input": testing.pod(testing.batch), "want": (13.2 * (21600 + 30)) / 21600},
	"no model selected prices the team default": {"input": testing.pod(testing.without_spec_field(testing.training, "nodeSelector")), "want": (704.64 * (86400 + 30)) / 86400},
	"another family prices its dearest model": {"input": testing.pod(testing.replace_spec(testing.with_limits(testing.training, {"google.com/tpu": "4"}), "nodeSelector", {})), "want": (115.2 * (86400 + 30)) / 86400},
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
	msgs == {"budget: team research would reach 101% of its monthly budget ($48000 spent this month + $2360 estimated for this workload, budget $50000), over the 100% limit; lower the devices, replicas or activeDeadlineSeconds (every completion and retry a Job's backoffLimit allows is priced), or ask the platform team for more budget"}
}

test_budget_warning_message if {
	with_spend(testing.pod(testing.training), spent("research", 38000), "warnings") == {"budget: team research would reach 81% of its monthly budget ($38000 spent this month + $2360 estimated for this workload, budget $50000), over the 80% warning line"}
}

serving_exempts_inference := object.union(testing.config, {"teams": {"serving": {"budget_exempt_types": ["inference"]}}})

test_budget_exempt_warning_message if {
	warnings := admission.warnings with input as testing.pod_in(testing.inference, "ml-serving")
		with data.fleetplane.config as serving_exempts_inference
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spent("serving", 29999)
		with time.now_ns as testing.now_ns
	some w in warnings
	endswith(w, "admitted because inference workloads are exempt from the budget limit")
	denials := admission.deny with input as testing.pod_in(testing.inference, "ml-serving")
		with data.fleetplane.config as serving_exempts_inference
		with data.fleetplane.approvals as testing.approvals
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

# ----------------------------------------------------- waves and retries

# One H100 hour on demand: 12.29; 8 of them: 98.32.
wave_cases := {
	# Issue 19: every completion and retry is priced (it was one wave).
	"job: one run and six retries at the default runtime": {"input": testing.job(testing.training, {}), "want": 7 * eight_h100_day},
	"job: completions in waves with their retries, each under its pod deadline": {
		"input": testing.job(testing.with_spec(testing.training, {"activeDeadlineSeconds": 3600}), {"parallelism": 2, "completions": 8, "backoffLimit": 2}),
		"want": 10 * eight_h100_hour,
	},
	"job: the job deadline bounds every wave": {
		"input": testing.job(testing.training, {"parallelism": 2, "completions": 8, "activeDeadlineSeconds": 3600}),
		"want": 2 * eight_h100_hour,
	},
	"job: no retries": {"input": testing.job(testing.training, {"backoffLimit": 0}), "want": eight_h100_day},
	"cronjob: one run": {"input": testing.cronjob_forbid(testing.training, {"backoffLimit": 0}), "want": eight_h100_day},
	# A Deployment's pods are replaced when they end: their deadline bounds nothing.
	"deployment with a pod deadline": {"input": testing.deployment(testing.with_spec(testing.training, {"activeDeadlineSeconds": 600}), 1), "want": eight_h100_day},
}

test_waves_and_retries[name] if {
	some name, tc in wave_cases
	near(with_spend(tc.input, {}, "estimate_usd"), tc.want)
}

# ------------------------------------------------------------- unbounded

# Issue 19: a type without a default runtime was priced at $0.
no_default_runtime := object.union(testing.config, {"workload_types": {"training": {"default_max_runtime_seconds": null}}})

with_config(rev, config, rule) := result if {
	result := admission[rule] with input as rev
		with data.fleetplane.config as config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

unbounded_cases := {
	"pod without a deadline": [testing.pod(testing.training), {"budget"}],
	"pod with a deadline": [testing.pod(testing.with_spec(testing.training, {"activeDeadlineSeconds": 3600})), set()],
	"deployment with a pod deadline": [testing.deployment(testing.with_spec(testing.training, {"activeDeadlineSeconds": 3600}), 1), {"budget"}],
	"job with a job deadline": [testing.job(testing.training, {"activeDeadlineSeconds": 3600}), set()],
}

test_unbounded_runtime[name] if {
	some name, [rev, want] in unbounded_cases
	{split(m, ":")[0] | some m in with_config(rev, no_default_runtime, "deny")} == want
}

test_unbounded_messages if {
	msgs := with_config(testing.pod(testing.training), no_default_runtime, "deny")
	"budget: nothing bounds how long the pods of pod run (no activeDeadlineSeconds, and training workloads have no default runtime), so its cost has no bound; set activeDeadlineSeconds on the Job (spec.activeDeadlineSeconds) or on its pods" in msgs
	some m in with_config(unbounded_cases["deployment with a pod deadline"][0], no_default_runtime, "deny")
	contains(m, "ask the platform team for a default runtime of training workloads")
}

test_ignored_failures_are_unbounded_without_a_job_deadline if {
	rev := testing.job(testing.with_spec(testing.training, {"activeDeadlineSeconds": 600}), {"podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}})
	some m in with_config(rev, testing.config, "deny")
	startswith(m, "budget: nothing bounds how many pods spec.template starts")
}

test_unbounded_exempt_type_is_admitted_with_a_warning if {
	config := object.union(no_default_runtime, {
		"workload_types": {"training": {"budget_exempt": true}},
		"teams": {"research": {"budget_exempt_types": ["training"]}},
	})
	rev := testing.pod(testing.training)
	with_config(rev, config, "deny") == set()
	with_config(rev, config, "allowed")
	some w in with_config(rev, config, "warnings")
	endswith(w, "admitted because team research is exempt from the budget limit for training workloads")
}

# ----------------------------------------------------------- reservations

reservations(entries) := {"research": entries}

with_reservations(rev, spend, entries, rule) := result if {
	result := admission[rule] with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with data.fleetplane.reservations as reservations(entries)
		with time.now_ns as testing.now_ns
}

rules_with_reservations(rev, entries) := {split(m, ":")[0] | some m in with_reservations(rev, spent("research", 38000), entries, "deny")}

live(usd) := {"usd": usd, "expires_at": testing.now + 600}

reservation_cases := {
	"no reservations: under the limit": [{}, set()],
	"reservations push it over": [{"uid-a": live(5000), "uid-b": live(5000)}, {"budget"}],
	"expired reservations count nothing": [{"uid-a": {"usd": 50000, "expires_at": testing.now}}, set()],
	"the workload's own reservation is not counted twice": [{"uid-job": live(50000)}, set()],
	"a reservation that covers the workload's owner": [{"uid-x": object.union(live(50000), {"uids": ["uid-cron"]})}, set()],
	"a malformed reservation": [{"uid-a": {"usd": "lots", "expires_at": testing.now + 600}}, {"budget"}],
}

# Created by the CronJob controller (only controllers write owner references: owners.rego).
owned_training_job := testing.by(
	object.union(testing.job(testing.training, {"backoffLimit": 0}), {"request": {"object": {"metadata": {"uid": "uid-job", "ownerReferences": [{"kind": "CronJob", "name": "c", "uid": "uid-cron"}]}}}}),
	"system:serviceaccount:kube-system:cronjob-controller", [],
)

test_reservations[name] if {
	some name, [entries, want] in reservation_cases
	rules_with_reservations(owned_training_job, entries) == want
}

test_reservation_messages if {
	msgs := with_reservations(owned_training_job, spent("research", 38000), reservation_cases["reservations push it over"][0], "deny")
	some m in msgs
	contains(m, "($38000 spent this month + $10000 reserved for workloads admitted since + $2360 estimated for this workload, budget $50000)")
	bad := with_reservations(owned_training_job, {}, reservation_cases["a malformed reservation"][0], "deny")
	some b in bad
	startswith(b, "budget: data.fleetplane.reservations.research must map workload uids to")
}
