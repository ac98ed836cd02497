# Fast path: Most reviews the gate sees are the common case: a well-formed
# CREATE of one pod template with app containers only, selected by
# nodeSelector, inside the team's rules, limits and budget. fast_allowed
# proves such a review is allowed without warnings in a few rules over the
# request, where the explaining rules derive every fact, place and message
# (several times the work: each rule and function call costs OPA far more
# than an inline expression). Whenever it cannot prove it (anything unusual:
# init containers, MIG slices, node affinity, several templates, an update, a
# rule that might fire, a warning), it is false and system.main answers from
# the full rules, which decide and explain. So it may be false for a review the
# full rules allow, and must never be true for one they deny or warn about:
# fast_test.rego and tests/policies/test_fast_path.py check exactly that on
# every fixture, the review corpus and the trace.
package fleetplane.admission

import data.fleetplane.budget
import data.fleetplane.lib
import data.fleetplane.lib.scheduling
import data.fleetplane.lib.workloads

# METADATA
# description: >-
#   True only for reviews the full rules allow without warnings (see the
#   package comment). Accelerator-free workloads need the envelope, the shape
#   and, in team namespaces, the security rules. Written as few rules as it
#   can be: the first reference to a rule costs OPA about as much as a dozen
#   inline expressions.
fast_allowed if {
	fast_common
	fast_secure
	fast_warnings
}

# METADATA
# description: >-
#   The single pod template of a well-formed CREATE, with what the fast rules
#   read: team and in_team (as fleetplane.admission.team and
#   in_team_namespace), spec, labels,
#   annotations, replicas, deadlines (the positive ones that bound the pods),
#   demand per resource of one pod (every accelerator resource mentioned,
#   zeros included), selector and volumes.
#   Undefined when anything is outside the common case.
fast_common := {
	"team": object.get(cfg.namespaces, ns, null),
	"in_team": count([1 | cfg.namespaces[ns]]) == 1,
	"spec": spec,
	"labels": labels,
	"annotations": annotations,
	"replicas": t.replicas,
	"deadlines": deadlines,
	"demand": {r: sum([n | some container_counts in counts; n := container_counts[r]]) |
		some container_counts in counts
		some r, _ in container_counts
	},
	"selector": selector,
	"volumes": volumes,
} if {
	request := input.request
	input.apiVersion == "admission.k8s.io/v1"
	input.kind == "AdmissionReview"
	is_string(request.uid)
	request.uid != ""
	request.operation == "CREATE"
	object.get(request, "subResource", "") == ""
	is_object(request.object)
	ns := request.namespace
	is_string(ns)
	ns != ""
	cfg := data.fleetplane.config
	is_object(cfg.namespaces)

	# One template (kind_class is defined, so the kind is a gated one).
	candidates := templates
	count(candidates) == 1
	t := candidates[0]
	is_object(t.template)
	spec := t.template.spec
	is_object(spec)
	containers := spec.containers
	is_array(containers)
	count(containers) > 0
	object.get(spec, "initContainers", []) == []
	object.get(spec, "ephemeralContainers", []) == []
	tolerations := object.get(spec, "tolerations", [])
	is_array(tolerations)
	volumes := object.get(spec, "volumes", [])
	is_array(volumes)
	selector := object.get(spec, "nodeSelector", {})
	is_object(selector)
	object.get(spec, ["affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"], null) == null
	metadata := object.get(t.template, "metadata", {})
	labels := object.get(metadata, "labels", {})
	is_object(labels)
	annotations := object.get(metadata, "annotations", {})
	is_object(annotations)
	is_number(t.replicas)
	t.replicas >= 0
	t.replicas == floor(t.replicas)
	deadlines := [d | some d in [t.deadline, object.get(spec, "activeDeadlineSeconds", null)]; d != null]
	count([d | some d in deadlines; is_number(d); d > 0; d == floor(d)]) == count(deadlines)

	# Containers: well formed; accelerator limits whole numbers; requests equal
	# to their limits; no MIG slices (the full rules handle those). One pass:
	# the device counts of each container's accelerator limits (requests of
	# accelerators are among its limits, so the limits name every resource).
	whole := lib.accelerator_resources
	mig := lib.mig_resource_prefix
	counts := [container_counts |
		some c in containers
		is_string(c.name)
		c.name != ""
		is_string(c.image)
		c.image != ""
		resources := object.get(c, "resources", {})
		limits := object.get(resources, "limits", {})
		is_object(limits)
		requests := object.get(resources, "requests", {})
		is_object(requests)
		not strings.any_prefix_match(object.keys(limits), mig)
		not strings.any_prefix_match(object.keys(requests), mig)
		count(object.keys(object.filter(requests, whole)) - object.keys(limits)) == 0
		accelerators := object.filter(limits, whole)
		container_counts := {r: n |
			some r, q in accelerators
			n := workloads.parse_count(q)
			object.get(requests, r, q) == q
		}
		count(container_counts) == count(accelerators)
	]
	count(counts) == count(containers)
}

# METADATA
# description: >-
#   The security rules hold: outside team namespaces there are none; inside,
#   every image comes from an allowed registry and nothing is privileged,
#   shares host namespaces or mounts hostPath volumes. Team namespaces as the
#   full rules see them (in_team: mapped to any value but false, null
#   included), not by the team's name.
fast_secure if {
	fast_common.in_team == false
} else if {
	c := fast_common
	registries := data.fleetplane.config.registries
	is_array(registries)

	# Registry entries that end with "/" are their own prefixes (see
	# registry_prefix); a configuration with another entry takes the full
	# rules. Counting comprehensions instead of every: OPA evaluates them
	# for less.
	count([r | some r in registries; endswith(r, "/")]) == count(registries)
	count([container |
		some container in c.spec.containers
		strings.any_prefix_match(qualified_image(container.image), registries)
		object.get(container, ["securityContext", "privileged"], false) != true
	]) == count(c.spec.containers)
	count([field | some field in ["hostNetwork", "hostPID", "hostIPC"]; c.spec[field] == true]) == 0
	count([volume | some volume in c.volumes; volume.hostPath]) == 0
}

# METADATA
# description: >-
#   The admission warnings, when the accelerator rules and the budget let the
#   workload in (no warning for a workload that asks for no accelerator):
#   known type and team, models selected by nodeSelector and allowed, size
#   under the limit and the approval threshold, capacity type, priority
#   class, checkpoint, idle timeout, and the budget: the team's spend plus
#   this workload's estimate under the warning line (no warning), over it
#   (the budget warning), or over the limit for a budget-exempt type (the
#   exemption warning); over the limit otherwise is a denial, for the full
#   rules. Undefined when the fast path cannot decide.
fast_warnings := [] if {
	count(fast_common.demand) == 0
} else := warnings if {
	c := fast_common
	cfg := data.fleetplane.config
	spec := c.spec

	# Team, type and the configuration the rules read.
	team := c.team
	team_config := cfg.teams[team]
	is_object(team_config)
	is_array(team_config.allowed_models)
	wt := c.labels[lib.keys.workload_type]
	tc := cfg.workload_types[wt]
	is_object(tc)
	is_number(tc.max_accelerators)
	is_array(tc.priority_classes)
	is_boolean(tc.checkpoint_required_on_spot)
	max_idle := tc.max_idle_timeout_seconds
	true in {is_number(max_idle), max_idle == null}
	approval := cfg.approval
	is_number(approval.threshold_accelerators)
	is_array(approval.approved_ids)

	# Priority class and idle timeout first: the rules reviews break most
	# often, so a review the full rules will deny leaves the fast path early.
	spec.priorityClassName in tc.priority_classes
	count({1 |
		is_number(max_idle)
		not fast_idle_timeout(object.get(c.annotations, lib.keys.idle_timeout_seconds, null), max_idle)
	}) == 0

	# Size: under the type's limit and the approval threshold; no nodeName.
	total := c.replicas * sum([n | some n in c.demand])
	total <= tc.max_accelerators
	total < approval.threshold_accelerators
	object.get(spec, "nodeName", "") == ""

	# Capacity: where the pod may run, as the full rules see it.
	placement := scheduling.spot_placement(spec)
	pins := placement.pins_spot
	opens := placement.opens_spot
	{"any": true, "on-demand": opens == false, "spot": pins}[tc.capacity] == true
	capacity := {true: "spot", false: "on-demand"}[pins]

	# Checkpoint on spot.
	count({1 |
		[tc.checkpoint_required_on_spot, opens] == [true, true]
		not checkpoint_uri(object.get(c.annotations, lib.keys.checkpoint_location, null))
	}) == 0

	# Models: the pod holds one accelerator resource (pods holding two
	# families take the full rules); the nodeSelector picks models of its
	# family, each one known, allowed for the team and priced. The price is
	# that of the dearest, and the cost of this one resource is the estimate
	# (no sum, which costs OPA as much as a product of floats).
	[r] := [r | some r, n in c.demand; n > 0]
	keys := {m.node_label | some m in cfg.models; m.resource == r}
	selected := {[k, v] | some k in keys; v := c.selector[k]}
	count(selected) > 0
	family_prices := [price |
		some [k, v] in selected
		names := [name | some name, m in cfg.models; m.node_label == k; m.label_value == v]
		count(names) == 1
		names[0] in team_config.allowed_models
		price := cfg.models[names[0]].price_per_hour_usd[capacity]
		is_number(price)
	]
	count(family_prices) == count(selected)
	price := max(family_prices)

	# Budget: this month's spend plus the estimate at or under both lines.
	month := budget.month(time.now_ns())
	record := object.get(fast_spend, team, {"month": month, "usd": 0})
	is_string(record.month)
	spent := {true: record.usd, false: 0}[record.month == month]
	is_number(spent)
	spent >= 0
	seconds := array.concat(sort(c.deadlines), [tc.default_max_runtime_seconds])[0]
	estimate := (((c.replicas * c.demand[r]) * price) * seconds) / 3600
	limit := team_config.monthly_budget_usd
	is_number(limit)
	is_number(cfg.budget.warn_ratio)
	is_number(cfg.budget.deny_ratio)
	warnings := fast_budget_warnings(
		{"total_usd": spent + estimate, "spent_usd": spent, "estimate_usd": estimate, "budget_usd": limit},
		cfg.budget,
		team,
		wt,
	)
}

# The budget warnings of budget.rego (budget_warning), from the comparisons of
# fleetplane.budget.level with the lines ratio x budget: none at or under the
# warning line when it is at or under the limit (warn_ratio <= deny_ratio, a
# budget of at least 0: then the total is under both, and the limit, a product
# of floats that costs OPA ~40 allocations, is not computed); the exemption
# warning over the limit for a budget-exempt type; the warning between the
# lines; undefined otherwise (a denial, or lines the full rules should judge).
fast_budget_warnings(amounts, ratios, team, wt) := [] if {
	ratios.warn_ratio <= ratios.deny_ratio
	amounts.budget_usd >= 0
	amounts.total_usd <= ratios.warn_ratio * amounts.budget_usd
} else := [budget_warning(object.union(amounts, {"level": "exempt"}), team, wt)] if {
	amounts.total_usd > ratios.deny_ratio * amounts.budget_usd
	budget.exempt(team, wt)
} else := [budget_warning(object.union(amounts, {"level": "warn"}), team, wt)] if {
	amounts.total_usd > ratios.warn_ratio * amounts.budget_usd
	amounts.total_usd <= ratios.deny_ratio * amounts.budget_usd
}

fast_idle_timeout(value, maximum) if {
	seconds := workloads.parse_count(value)
	seconds > 0
	seconds <= maximum
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
