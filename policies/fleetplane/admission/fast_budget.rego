# Fast path, the budget (see fast.rego): a template's pod-seconds with its
# grace, the team's spend and reservations, and the budget's denials and
# warnings exactly as budget.rego words them.
package fleetplane.admission

import data.fleetplane.budget
import data.fleetplane.lib.workloads

# The pod-seconds of a template (workloads.pod_seconds with the type's default
# runtime, each bound followed by the grace, as budget.rego's pod_seconds), or
# null when nothing bounds them. One run of a pod with no deadline is the
# default runtime and the grace (the product, 1 x fallback, costs OPA about
# 50 allocations).
fast_pod_seconds(t, wall, pod_deadline, fallback, grace) := fallback + grace if {
	wall == null
	pod_deadline == null
	t.runs == 1
	is_number(fallback)
} else := seconds if {
	seconds := workloads.pod_seconds(t.replicas, t.runs, with_grace(wall, grace), t.replaced, with_grace(pod_deadline, grace), with_grace(fallback, grace))
} else := null

# The budget's [denials, warnings] for a workload that costs seconds x
# devices x price (see fast_budget); for one nothing bounds (null seconds),
# the exemption warning when the team is exempt for its type, as the full
# rules give it (unbounded_exempt_warning); undefined otherwise (the full
# rules deny it and say what bound to set).
fast_cost_verdict(seconds, cost, ratios, who) := fast_budget(
	{
		"total_usd": (cost.spent_usd + cost.reserved_usd) + estimate, "spent_usd": cost.spent_usd,
		"reserved_usd": cost.reserved_usd, "estimate_usd": estimate, "budget_usd": cost.budget_usd,
	},
	ratios,
	who.team,
	who.type,
) if {
	is_number(seconds)
	estimate := ((cost.devices * cost.price) * seconds) / 3600
}

fast_cost_verdict(null, _, _, who) := [[], [unbounded_exempt_warning(who.where, who.runs, who.team, who.type)]] if {
	budget.exempt(who.team, who.type)
}

# The team's unexpired reservations not of this object (budget.reserved:
# the controller's and those made at admission), without computing the
# object's uids when the team has none.
fast_reserved(team, _) := 0 if {
	not data.fleetplane.reservations[team]
	not data.fleetplane.admitted[team]
} else := budget.reserved(team, now, object_uids) if {
	now := time.now_ns()
}

# The budget's [denials, warnings] as budget.rego gives them (budget_denial,
# budget_warning), from the comparisons of fleetplane.budget.level with the
# lines ratio x budget: none at or under the warning line when it is at or
# under the limit (warn_ratio <= deny_ratio, a budget of at least 0: then the
# total is under both, and the limit, a product of floats that costs OPA ~40
# allocations, is not computed); the exemption warning over the limit for a
# budget-exempt type; the denial over the limit for any other (with those
# lines); the warning between the lines; undefined otherwise (lines the full
# rules should judge).
fast_budget(amounts, ratios, team, wt) := [[], []] if {
	ratios.warn_ratio <= ratios.deny_ratio
	amounts.budget_usd >= 0
	amounts.total_usd <= ratios.warn_ratio * amounts.budget_usd
} else := [[], [budget_warning(object.union(amounts, {"level": "exempt"}), team, wt)]] if {
	amounts.total_usd > ratios.deny_ratio * amounts.budget_usd
	budget.exempt(team, wt)
} else := [[budget_denial(object.union(amounts, {"level": "deny"}), team)], []] if {
	ratios.warn_ratio <= ratios.deny_ratio
	amounts.budget_usd >= 0
	amounts.total_usd > ratios.deny_ratio * amounts.budget_usd
} else := [[], [budget_warning(object.union(amounts, {"level": "warn"}), team, wt)]] if {
	amounts.total_usd > ratios.warn_ratio * amounts.budget_usd
	amounts.total_usd <= ratios.deny_ratio * amounts.budget_usd
}

# The spend document the controller publishes; a missing one means nothing is
# spent (as in fleetplane.budget), anything else but an object takes the full
# rules.
fast_spend := spend if {
	spend := data.fleetplane.spend
	is_object(spend)
} else := {} if {
	not data.fleetplane.spend
}
