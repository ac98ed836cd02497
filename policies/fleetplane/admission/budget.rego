# Budget rule: Prices the workload (devices x hourly price of its model and
# capacity type x its maximum runtime) and asks fleetplane.budget for the
# verdict against the team's monthly budget. Checked when a workload is
# created.
package fleetplane.admission

import data.fleetplane.budget
import data.fleetplane.config
import data.fleetplane.lib

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
#   Maximum runtime of a template's pods: the shortest activeDeadlineSeconds,
#   else the type's default.
runtime(f) := f.deadline if {
	f.deadline != null
} else := type_config.default_max_runtime_seconds

# METADATA
# description: One cost item per template and accelerator resource.
cost_items := [item |
	some i, f in facts
	some resource, n in f.demand
	n > 0
	item := {
		"devices": f.replicas * n,
		"price_per_hour_usd": price(placement[i], lib.family(resource)),
		"seconds": runtime(f),
	}
]

expected_cost_items := count([1 | some f in facts; some n in f.demand; n > 0])

estimate_usd := budget.estimate_usd(cost_items) if count(cost_items) == expected_cost_items

verdict := budget.verdict(team, workload_type, estimate_usd, now_ns)

deny contains sprintf("budget: %s", [msg]) if {
	budget_checked

	# A spend problem leaves no verdict (the spend is undefined); the verdict
	# is derived anyway, so this spares OPA the call on the common path.
	not verdict
	some msg in budget.spend_problems(team, now_ns)
}

deny contains msg if {
	budget_checked
	verdict.level == "deny"
	msg := sprintf(
		"budget: %s, over the %d%% limit; lower the devices, replicas or activeDeadlineSeconds, or ask the platform team for more budget",
		[budget.describe(team, verdict), round(config.budget.deny_ratio * 100)],
	)
}

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

# The budget saw the workload: the verdict was reached (or nothing is priced).
default budget_evaluated := false

budget_evaluated if not budget_checked

budget_evaluated if {
	budget_checked
	is_string(verdict.level)
}
