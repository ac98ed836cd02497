# Budget rule: Prices the workload (devices x hourly price of its model and
# capacity type x the pod-seconds its pods may run in all: every run of a
# Job's completions and retries, replicas of a replicated workload for the
# type's default runtime, bounded by a workload deadline) and asks
# fleetplane.budget for the verdict against the team's monthly budget, with
# the spend and the reservations of workloads admitted since. A workload
# nothing bounds in time is priced as unbounded: denied unless the team is
# exempt for its type. Checked when a workload is created.
package fleetplane.admission

import data.fleetplane.budget
import data.fleetplane.config
import data.fleetplane.lib
import data.fleetplane.lib.workloads

budget_checked if {
	judged
	input.request.operation == "CREATE"
}

# METADATA
# description: >-
#   Hourly price of one device of a family for a template, at its capacity
#   (spot only when pinned to spot, otherwise on-demand, the dearer): the
#   dearest model it may land on (undefined when one of them has no price, so
#   the review is refused); when it selects none (it is denied for that
#   anyway), the team's default model, else the dearest model of the family.
#   A MIG device is priced as a whole GPU of its model, an upper bound.
price(p, family) := max(prices) if {
	models := p.families[family].models
	count(models) > 0
	prices := [price |
		some name in models
		price := config.models[name].price_per_hour_usd[p.capacity]
	]
	count(prices) == count(models)
} else := price if {
	count(p.families[family].models) == 0
	m := config.models[team_config.default_model]
	m.resource == family
	price := m.price_per_hour_usd[p.capacity]
} else := max(prices) if {
	count(p.families[family].models) == 0
	prices := {price | some m in config.models; m.resource == family; price := m.price_per_hour_usd[p.capacity]}
	count(prices) > 0
}

# METADATA
# description: >-
#   Pod-seconds the pods of a template may hold their devices in all
#   (workloads.pod_seconds with the type's default runtime, each bound on a
#   run followed by the pods' termination grace, termination.rego); undefined
#   when nothing bounds them.
pod_seconds(f) := workloads.pod_seconds(
	f.replicas,
	f.runs,
	with_grace(f.wall, grace),
	f.replaced,
	with_grace(f.pod_deadline, grace),
	with_grace(type_config.default_max_runtime_seconds, grace),
) if {
	grace := priced_grace(f.spec)
}

# METADATA
# description: One cost item per template and accelerator resource.
cost_items := [item |
	some i, f in facts
	some resource, n in f.demand
	n > 0
	item := {
		"devices": n,
		"price_per_hour_usd": price(placement[i], lib.family(resource)),
		"seconds": pod_seconds(f),
	}
]

expected_cost_items := count([1 | some f in facts; some n in f.demand; n > 0])

estimate_usd := budget.estimate_usd(cost_items) if count(cost_items) == expected_cost_items

# The accelerator templates nothing bounds in time.
unbounded_templates := [f | some f in facts; f.devices > 0; not pod_seconds(f)]

verdict := budget.verdict(team, workload_type, estimate_usd, now_ns, object_uids)

deny contains sprintf("budget: %s", [msg]) if {
	budget_checked

	# A spend problem leaves no verdict (the spend is undefined); the verdict
	# is derived anyway, so this spares OPA the call on the common path.
	not verdict
	some msg in (budget.spend_problems(team, now_ns) | budget.reservation_problems(team, now_ns, object_uids))
}

deny contains msg if {
	budget_checked
	not budget.exempt(team, workload_type)
	some f in unbounded_templates
	msg := sprintf("budget: %s, so its cost has no bound; %s", [unbounded_reason(f.where, f.runs, workload_type), unbounded_fix(f)])
}

warnings contains unbounded_exempt_warning(f.where, f.runs, team, workload_type) if {
	budget_checked
	budget.exempt(team, workload_type)
	some f in unbounded_templates
}

# METADATA
# description: >-
#   The admission warning for a template nothing bounds in time (where, its
#   runs: null when nothing bounds them either) of a type the team is exempt
#   for (the fast path gives the same).
unbounded_exempt_warning(where, runs, team_name, type_name) := sprintf(
	"budget: %s; admitted because team %s is exempt from the budget limit for %s workloads",
	[unbounded_reason(where, runs, type_name), team_name, type_name],
)

unbounded_reason(where, runs, type_name) := sprintf(
	"nothing bounds how long the pods of %s run (no activeDeadlineSeconds, and %s workloads have no default runtime)",
	[where, type_name],
) if {
	runs != null
} else := sprintf(
	"nothing bounds how many pods %s starts (a JobSet failure policy rule with action RestartJobSetAndIgnoreMaxRestarts)",
	[where],
) if {
	startswith(where, "spec.replicatedJobs[")
} else := sprintf(
	"nothing bounds how many pods %s starts (a podFailurePolicy rule with action Ignore) nor the Job's activeDeadlineSeconds",
	[where],
)

unbounded_fix(f) := sprintf(
	"ask the platform team for a default runtime of %s workloads (the pods of %s are replaced when they end, so their own deadline bounds nothing)",
	[workload_type, f.where],
) if {
	f.replaced
} else := "use the action RestartJobSet, whose restarts spec.failurePolicy.maxRestarts counts" if {
	startswith(f.where, "spec.replicatedJobs[")
} else := "set activeDeadlineSeconds on the Job (spec.activeDeadlineSeconds) or on its pods"

deny contains budget_denial(verdict, team) if {
	budget_checked
	verdict.level == "deny"
}

# METADATA
# description: >-
#   The denial of a verdict of level deny (the fast path gives the same).
budget_denial(v, team_name) := sprintf(
	"budget: %s, over the %d%% limit; lower the devices, replicas or activeDeadlineSeconds (every completion and retry a Job's backoffLimit allows is priced), or ask the platform team for more budget",
	[budget.describe(team_name, v), round(config.budget.deny_ratio * 100)],
)

warnings contains budget_warning(verdict, team, workload_type) if {
	budget_checked
	verdict.level in {"warn", "exempt"}
}

# METADATA
# description: >-
#   The admission warning for a verdict of level warn or exempt (the fast path
#   gives the same).
budget_warning(v, team_name, type_name) := sprintf(
	"budget: %s, over the %d%% warning line",
	[budget.describe(team_name, v), round(config.budget.warn_ratio * 100)],
) if {
	v.level == "warn"
} else := sprintf(
	"budget: %s; admitted because %s workloads are exempt from the budget limit",
	[budget.describe(team_name, v), type_name],
) if {
	v.level == "exempt"
}

# The budget saw the workload: the verdict was reached, the workload is
# unbounded (denied or exempt), or nothing is priced.
default budget_evaluated := false

budget_evaluated if not budget_checked

budget_evaluated if {
	budget_checked
	is_string(verdict.level)
}

budget_evaluated if {
	budget_checked
	count(unbounded_templates) > 0
}
