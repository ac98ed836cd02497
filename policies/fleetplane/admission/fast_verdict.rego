# Fast path, the verdict (see fast.rego): the accelerator rules reviews break
# most often (team, type, size, capacity type, checkpoint, model, reserved
# pools, priority class, idle timeout, queue) judged with the full rules'
# messages over fast_base, and the budget (fast_budget.rego).
package fleetplane.admission

import data.fleetplane.budget
import data.fleetplane.lib
import data.fleetplane.lib.scheduling

# METADATA
# description: >-
#   {denials, warnings} for a review in fast_base's common case: for a
#   workload that asks for no accelerator, fast_base's image denials and no
#   warnings; otherwise every accelerator rule checked (known type and team,
#   size under the limit and the approval threshold, capacity type,
#   checkpoint) with the image, model-selection, priority-class and
#   idle-timeout denials collected, and the budget: the team's spend plus this
#   workload's estimate under the warning line (no warning), over it (the
#   budget warning), or over the limit for a budget-exempt type (the exemption
#   warning); over the limit otherwise is a denial, for the full rules. A
#   workload nothing bounds in time is allowed with the exemption warning
#   when its team is exempt for its type (denied otherwise, by the full
#   rules).
#   A workload without accelerators must not reach them either (tolerate the
#   accelerator taints or select accelerator nodes). Undefined when the fast
#   path cannot decide.
fast_verdict := {"denials": fast_base.denials, "warnings": []} if {
	fast_base.limits == []
	not fast_base.annotations["scheduling.volcano.sh/queue-name"]
	fast_base.affinity == null
	not fast_reaches_accelerators(fast_base.spec, fast_base.selector)
} else := {"denials": denials, "warnings": warnings} if {
	b := fast_base
	cfg := data.fleetplane.config
	spec := b.spec

	# One accelerator family, every limit of it a whole count, some devices.
	[r] := [r | some r in b.resources]
	count(b.counts) == count(b.limits)
	devices := sum(b.counts)
	devices > 0

	# Team, type and the configuration the rules read.
	team := cfg.namespaces[b.namespace]
	team_config := cfg.teams[team]
	is_object(team_config)
	is_array(team_config.allowed_models)
	wt := b.labels[lib.keys.workload_type]
	tc := cfg.workload_types[wt]
	is_object(tc)
	is_number(tc.max_accelerators)
	is_array(tc.priority_classes)
	is_boolean(tc.checkpoint_required_on_spot)
	max_idle := tc.max_idle_timeout_seconds
	fast_number_or_null(max_idle)
	approval := cfg.approval
	is_number(approval.threshold_accelerators)

	# Size: bounded, under the type's limit and the approval threshold; a
	# CronJob's runs do not overlap; no ConfigMap or Secret may set the
	# runtime's device variables.
	b.template.bounded
	total := b.replicas * devices

	# A grace period within the bound (termination.rego's
	# max_termination_grace_seconds, as a literal); any other takes the full
	# rules.
	grace := b.grace
	is_number(grace)
	grace >= 0
	grace <= 120
	grace == floor(grace)
	total <= tc.max_accelerators
	total < approval.threshold_accelerators
	{true: object.get(input.request.object, ["spec", "concurrencyPolicy"], "Allow"), false: "Forbid"}[input.request.kind.kind == "CronJob"] in {"Forbid", "Replace"}
	count([1 |
		some c in spec.containers
		some source in c.envFrom
		strings.any_prefix_match(
			[
				"NVIDIA_VISIBLE_DEVICES", "NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES", "NVIDIA_IMEX_CHANNELS",
				"NVIDIA_GDS", "NVIDIA_MOFED", "NVIDIA_GDRCOPY", "NVIDIA_NVSWITCH",
			],
			object.get(source, "prefix", ""),
		)
	]) == 0

	# Capacity: where the pod may run, as the full rules see it.
	placement := fast_spot_placement(spec, b.selector, b.affinity)
	pins := placement.pins_spot
	opens := placement.opens_spot
	{"any": true, "on-demand": opens == false, "spot": pins}[tc.capacity] == true
	capacity := {true: "spot", false: "on-demand"}[pins]
	not fast_checkpoint_missing(tc.checkpoint_required_on_spot, opens, b.annotations)

	# Model: one allowed model selected, or allowed models by affinity, or
	# none (a denial); the price; no pool of a model it may land on reserved
	# for other teams.
	[model_denials, price, picked] := fast_model(r, b.selector, b.affinity, team_config, capacity, b.where)
	is_number(price)

	#
	# Only the reserved pools are walked (config.reserved_pools, as the full
	# rules read them): a walk over every pool costs OPA about ten
	# allocations a pool (the replay's fleet has 30 pools: 280 of a review's
	# 2,350).
	is_object(cfg.pools)
	reserved_pools := cfg.reserved_pools
	is_object(reserved_pools)
	count([1 |
		some name, teams in reserved_pools
		fast_pool_restricts(name, teams, object.get(cfg.pools, name, {}), b.selector, picked, team)
	]) == 0

	# The rules reviews break most often, with the full rules' messages.
	rule_denials := array.concat(
		array.concat(b.denials, model_denials),
		array.concat(
			fast_priority_denial(spec, tc.priority_classes, b.where, wt),
			array.concat(
				fast_idle_timeout_denial(max_idle, b.annotations, b.where, wt),
				fast_queue_denial(b.annotations, team_config, b.where),
			),
		),
	)

	# Budget: this month's spend and the reservations plus the estimate
	# judged against both lines (a denial over the limit, with the full
	# rules' message); or, for a workload nothing bounds in time (no
	# estimate), a type the team is exempt for, with well-formed spend and
	# reservations (the full rules check those when there is no estimate).
	now := time.now_ns()
	month := budget.month(now)
	record := object.get(fast_spend, team, {"month": month, "usd": 0})
	is_string(record.month)
	spent := {true: record.usd, false: 0}[record.month == month]
	is_number(spent)
	spent >= 0
	reserved := fast_reserved(team, now)
	t := b.template
	seconds := fast_pod_seconds(t, b.wall, b.pod_deadline, tc.default_max_runtime_seconds, grace)
	limit := team_config.monthly_budget_usd
	is_number(limit)
	is_number(cfg.budget.warn_ratio)
	is_number(cfg.budget.deny_ratio)
	[budget_denials, warnings] := fast_cost_verdict(
		seconds,
		{"devices": devices, "price": price, "spent_usd": spent, "reserved_usd": reserved, "budget_usd": limit},
		cfg.budget,
		{"team": team, "type": wt, "where": b.where, "runs": t.runs},
	)
	denials := array.concat(rule_denials, budget_denials)
}

# Where the pod may run, as scheduling.spot_placement reads it, for the shapes
# fast_base lets through: without required node affinity, or with one whose
# key is no spot label (a model label, as most say), only the nodeSelector
# can pin spot, and only it or a toleration of the spot taint can open it;
# an expression on a spot label takes the general function. lib's spot
# labels and the spot taint's key are written here as literals (a constant
# rule costs an evaluation per review; fast_verdict_test.rego holds them equal): a
# replay review went from 1,516 to 1,442 allocations.
fast_spot_placement(spec, selector, affinity) := scheduling.spot_placement(spec) if {
	affinity != null
	affinity.key in {"fleetplane.dev/capacity-type", "karpenter.sh/capacity-type", "eks.amazonaws.com/capacityType", "cloud.google.com/gke-spot"}
} else := {"pins_spot": pins, "opens_spot": opens} if {
	pins := count([k | some k, v in selector; lib.spot_node_labels[k] == v]) > 0

	# Only a toleration of the spot taint's key, or of every key, can
	# tolerate it (scheduling.tolerates); most pods tolerate others only.
	opens := true in {pins, count([t |
		some t in spec.tolerations
		object.get(t, "key", "") in {"", "fleetplane.dev/capacity-type"}
		scheduling.tolerates(t, lib.spot_taint)
	]) > 0}
}

# A pod without accelerators that may land on accelerator nodes: it tolerates
# their taints or selects them (the full rules deny it).
fast_reaches_accelerators(spec, _) if {
	some toleration in spec.tolerations
	some taint in lib.accelerator_taints
	scheduling.tolerates(toleration, taint)
}

fast_reaches_accelerators(_, selector) if {
	some key, _ in selector
	accelerator_node_label(key)
}

# A reserved pool the fast path leaves to the full rules: its teams is not a
# list, or it is reserved for other teams and the pod may land on it (of a
# model it selects, by nodeSelector or among the models fast_model picked,
# among the pools it selects if it does; the full rules also tell capacity
# types apart). The node affinity fast_model reads names no pool label, so
# only the nodeSelector selects pools.
fast_pool_restricts(name, teams, pool, selector, picked, team) if {
	not is_array(teams)
} else if {
	not team in teams
	fast_pool_model_selected(pool.model, selector, picked)
	object.get(selector, lib.keys.pool, name) == name
}

fast_pool_model_selected(model, _, picked) if model in picked

fast_pool_model_selected(model, selector, _) if {
	models := data.fleetplane.config.models
	selector[models[model].node_label] == models[model].label_value
}

# The models of the family the pod may land on, as [denials, price per hour,
# models]: by nodeSelector, exactly one label of the family selected, its
# value exactly one known model, allowed for the team; by required node
# affinity (no label of the family in the nodeSelector), an expression `In`
# on a label of the family whose every value names a known model, each
# allowed for the team, priced at the dearest (as the full rules read
# scheduling.label_values and price it: model_choice, price); or no label of
# the family selected and no required node affinity, denied with the full
# rules' message (model_selection_message) and priced as they price it (the
# team's default model, else the family's dearest). Undefined otherwise (the
# full rules explain).
fast_model(r, selector, affinity, team_config, capacity, where) := [[], models[model].price_per_hour_usd[capacity], {model}] if {
	affinity == null
	models := data.fleetplane.config.models
	count({m.node_label | some m in models; m.resource == r; _ = selector[m.node_label]}) == 1
	[model] := [name | some name, m in models; m.resource == r; selector[m.node_label] == m.label_value]
	model in team_config.allowed_models
} else := [[], max(prices), picked] if {
	models := data.fleetplane.config.models
	affinity != null
	key := affinity.key
	family_keys := {m.node_label | some m in models; m.resource == r}
	key in family_keys
	count({k | some k in family_keys; _ = selector[k]}) == 0

	# The models of those values (of any family, as model_choice looks them
	# up), every distinct value naming one, every one allowed.
	picked := {name | some name, m in models; m.node_label == key; m.label_value in affinity.values}
	count({m.label_value | some name in picked; m := models[name]}) == count({v | some v in affinity.values})
	count([name | some name in picked; not name in team_config.allowed_models]) == 0
	prices := [p | some name in picked; p := models[name].price_per_hour_usd[capacity]]
	count(prices) == count(picked)
} else := [[model_selection_message(where, r, keys)], price({"families": {r: {"models": []}}, "capacity": capacity}, r), set()] if {
	affinity == null
	keys := {m.node_label | some m in data.fleetplane.config.models; m.resource == r}
	count(keys) > 0
	count({k | some k in keys; _ = selector[k]}) == 0
}

fast_number_or_null(x) if x == null

fast_number_or_null(x) if is_number(x)

fast_checkpoint_missing(true, true, annotations) if {
	not checkpoint_uri(object.get(annotations, lib.keys.checkpoint_location, null))
}

# The two rules reviews break most often, judged here with the full rules'
# messages (priority_class_message, idle_timeout_message) so that such a
# review is denied without them: [] when the rule holds, [message] when not.
# The queue annotation of an accelerator template (queue.rego): the team's
# queue, or missing (a denial with the full rules' message); any other value
# is left undefined, for the full rules.
fast_queue_denial(annotations, team_config, where) := [] if {
	annotations["scheduling.volcano.sh/queue-name"] == team_config.queue
	is_string(team_config.queue)
	team_config.queue != ""
} else := [queue_annotation_missing_message(where)] if {
	not annotations["scheduling.volcano.sh/queue-name"]
}

fast_priority_denial(spec, classes, where, wt) := [] if {
	spec.priorityClassName in classes
} else := [priority_class_message(where, spec, wt, classes)]

fast_idle_timeout_denial(maximum, annotations, where, wt) := [] if {
	maximum == null
} else := [] if {
	declares_idle_timeout(annotations, maximum)
} else := [idle_timeout_message(wt, where, maximum)]
